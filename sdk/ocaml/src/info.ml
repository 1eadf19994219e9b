(* The key/value encoding of request_info and response_info
   (proto/PROTOCOL.md section 5): key\000value\000key\000value\000... *)

(* Raises [Invalid_argument] for a key or value holding NUL. *)
let encode pairs =
  let b = Buffer.create 64 in
  List.iter
    (fun (k, v) ->
      if String.contains k '\000' || String.contains v '\000' then invalid_arg "Cumulo.Info.encode: NUL in a key or value";
      Buffer.add_string b k; Buffer.add_char b '\000'; Buffer.add_string b v; Buffer.add_char b '\000')
    pairs;
  Buffer.contents b

(* The pairs in order (keys may repeat); raises [Status.Error (Malformed, _)]. *)
let parse s =
  let n = String.length s in
  if n > 0 && s.[n - 1] <> '\000' then Status.fail Status.Malformed "key/value bytes do not end with NUL";
  let rec fields pos acc =
    if pos >= n then List.rev acc
    else
      let nul = String.index_from s pos '\000' in
      fields (nul + 1) (String.sub s pos (nul - pos) :: acc)
  in
  let rec pairs = function
    | k :: v :: rest -> (k, v) :: pairs rest
    | [] -> []
    | [ _ ] -> Status.fail Status.Malformed "a key without its value"
  in
  pairs (fields 0 [])

(* The value of the first [key], if any (None for malformed bytes too). *)
let lookup s key = match parse s with pairs -> List.assoc_opt key pairs | exception Status.Error _ -> None
