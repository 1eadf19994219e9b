(* Unmanaged client: client SOCKET NAME HEX_BODY [sync|async]
   Prints the hex response_info, a newline and the response body; on an
   error status prints its name, a newline and the message, and exits 3. *)

let hex_decode h = String.init (String.length h / 2) (fun i -> Char.chr (int_of_string ("0x" ^ String.sub h (2 * i) 2)))
let hex_encode s = String.concat "" (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))

let () =
  let socket = Sys.argv.(1) and name = Sys.argv.(2) and body = hex_decode Sys.argv.(3) in
  let mode = if Array.length Sys.argv > 4 then Sys.argv.(4) else "sync" in
  let api = Cumulo.create ~socket ~token:"" ~prefix:"/client/ocaml/" () in
  let result =
    try
      Ok
        (if mode = "async" then
           let _, info, response = Cumulo.recv_async api ~trans_id:(Cumulo.send_async api name body) () in
           (info, response)
         else Cumulo.send_sync api name body)
    with Cumulo.Error (status, message) -> Error (status, message)
  in
  Cumulo.close api;
  set_binary_mode_out stdout true;
  match result with
  | Ok (info, response) -> print_string (hex_encode info ^ "\n" ^ response)
  | Error (status, message) ->
    print_string (Cumulo.Status.to_string status ^ "\n" ^ message);
    exit 3
