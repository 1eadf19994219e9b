(* The http_req example service (docs/SDK_GUIDE.md): answers ocaml.xml/get
   with the integer found under the key "value" of the key/value request
   body. One instance per thread, CUMULO_THREAD_COUNT of them. *)

let () =
  let window = match Sys.getenv_opt "HTTP_REQ_WINDOW" with Some w when w <> "" -> int_of_string w | _ -> 1 in
  Cumulo.run ~window (fun api -> Cumulo.subscribe api "ocaml.xml/get" (fun _ r -> Answer.answer r.Cumulo.request))
