(* Faulty service: /tests/faulty/ocaml/boom raises, /ok answers "ok". *)

exception Faulty_error of string

let () =
  Cumulo.run (fun api ->
      Cumulo.subscribe api "boom" (fun _ _ -> raise (Faulty_error "boom from ocaml"));
      Cumulo.subscribe api "ok" (fun _ _ -> ("", "ok")))
