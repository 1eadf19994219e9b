(* Faulty service: /tests/faulty/ocaml/boom raises, /ok answers "ok".
   trace_sync, trace_async, trace_mcast, trace_forward call /echo/trace with
   an empty request_info and answer what it got (PROTOCOL.md 5.1: the
   handler's calls carry its request's trace context). *)

exception Faulty_error of string

let () =
  Cumulo.run (fun api ->
      Cumulo.subscribe api "boom" (fun _ _ -> raise (Faulty_error "boom from ocaml"));
      Cumulo.subscribe api "ok" (fun _ _ -> ("", "ok"));
      Cumulo.subscribe api "trace_sync" (fun api _ -> ("", fst (Cumulo.send_sync api "/echo/trace" "")));
      Cumulo.subscribe api "trace_async" (fun api _ ->
          let trans_id = Cumulo.send_async api "/echo/trace" "" in
          let _, info, _ = Cumulo.recv_async api ~trans_id () in
          ("", info));
      Cumulo.subscribe api "trace_mcast" (fun api _ ->
          match Cumulo.mcast_async api "/echo/trace" "" with
          | trans_id :: _ ->
            let _, info, _ = Cumulo.recv_async api ~trans_id () in
            ("", info)
          | [] -> failwith "no copy sent");
      Cumulo.subscribe api "trace_forward" (fun api r ->
          Cumulo.forward api ~request_info:"" r "/echo/trace";
          ("", "")))
