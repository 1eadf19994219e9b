(* {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
   answers "hello from {{name}}", with the request's "value" parameter when
   it has one. One instance per thread, CUMULO_THREAD_COUNT of them. *)

let text = Cumulo.info_encode [ ("content-type", "text/plain; charset=utf-8") ]

(* Malformed key/value bytes are answered as if there were no value. *)
let () =
  Cumulo.run (fun api ->
      Cumulo.subscribe api "{{name}}/get" (fun _api r ->
          match Cumulo.Info.lookup r.Cumulo.request "value" with
          | Some value -> (text, "hello from {{name}} (value " ^ value ^ ")")
          | None -> (text, "hello from {{name}}")))
