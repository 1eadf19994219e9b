(* The http_req example service (docs/SDK_GUIDE.md): answers ocaml.xml/get
   with the integer found under the key "value" of the key/value request
   body. One instance per thread, CUMULO_THREAD_COUNT of them. *)

(* HTTP_REQ_WINDOW: requests the core may deliver at once (default 1);
   anything but a positive integer stops the process. *)
let window () =
  match Sys.getenv_opt "HTTP_REQ_WINDOW" with
  | None | Some "" -> 1
  | Some w -> (
      let digits = String.for_all (fun c -> c >= '0' && c <= '9') w in
      match if digits then int_of_string_opt w else None with
      | Some n when n >= 1 && n <= 0xFFFFFFFF -> n
      | _ ->
          prerr_endline (Printf.sprintf "http_req: HTTP_REQ_WINDOW='%s' is not a positive integer" w);
          exit 2)

let () =
  let window = window () in
  Cumulo.run ~window (fun api -> Cumulo.subscribe api "ocaml.xml/get" (fun _ r -> Answer.answer r.Cumulo.request))
