(* A small JSON reader for the shared vectors (no JSON library in Debian's
   OCaml packages here): numbers stay text, so u64 values are exact. *)

type t = Null | Bool of bool | Number of string | String of string | List of t list | Object of (string * t) list

let parse s =
  let pos = ref 0 in
  let n = String.length s in
  let peek () = if !pos < n then s.[!pos] else '\000' in
  let rec ws () = if !pos < n && String.contains " \n\r\t" s.[!pos] then (incr pos; ws ()) in
  let expect c = ws (); if peek () <> c then failwith (Printf.sprintf "json: %c expected at %d" c !pos); incr pos in
  let string () =
    expect '"';
    let b = Buffer.create 16 in
    let rec go () =
      match s.[!pos] with
      | '"' -> incr pos
      | '\\' ->
        let c = s.[!pos + 1] in
        pos := !pos + 2;
        (match c with
         | 'n' -> Buffer.add_char b '\n' | 't' -> Buffer.add_char b '\t' | 'r' -> Buffer.add_char b '\r'
         | 'b' -> Buffer.add_char b '\b' | 'f' -> Buffer.add_char b '\012'
         | 'u' ->
           Buffer.add_utf_8_uchar b (Uchar.of_int (int_of_string ("0x" ^ String.sub s !pos 4)));
           pos := !pos + 4
         | c -> Buffer.add_char b c);
        go ()
      | c -> Buffer.add_char b c; incr pos; go ()
    in
    go ();
    Buffer.contents b
  in
  let rec value () =
    ws ();
    match peek () with
    | '{' ->
      incr pos; ws ();
      if peek () = '}' then (incr pos; Object [])
      else
        let rec members acc =
          let k = string () in
          expect ':';
          let v = value () in
          ws ();
          let acc = (k, v) :: acc in
          if peek () = ',' then (incr pos; ws (); members acc) else (expect '}'; Object (List.rev acc))
        in
        members []
    | '[' ->
      incr pos; ws ();
      if peek () = ']' then (incr pos; List [])
      else
        let rec items acc =
          let v = value () in
          ws ();
          if peek () = ',' then (incr pos; items (v :: acc)) else (expect ']'; List (List.rev (v :: acc)))
        in
        items []
    | '"' -> String (string ())
    | 't' -> pos := !pos + 4; Bool true
    | 'f' -> pos := !pos + 5; Bool false
    | 'n' -> pos := !pos + 4; Null
    | _ ->
      let start = !pos in
      while !pos < n && String.contains "-+0123456789.eE" s.[!pos] do incr pos done;
      Number (String.sub s start (!pos - start))
  in
  let v = value () in
  ws ();
  if !pos <> n then failwith "json: trailing text";
  v

let member k = function Object m -> List.assoc k m | _ -> failwith ("json: no object for " ^ k)
let member_opt k = function Object m -> List.assoc_opt k m | _ -> None
let to_string = function String s -> s | _ -> failwith "json: string expected"
let to_list = function List l -> l | _ -> failwith "json: list expected"
let to_int = function Number n -> int_of_string n | _ -> failwith "json: number expected"
(* a u64 as its bits *)
let to_int64 = function Number n -> Int64.of_string ("0u" ^ n) | _ -> failwith "json: number expected"
