(* The OCaml SDK's tests: every shared vector of proto/vectors/*.json, the
   key/value encoding, and the session logic against a fake core over a
   real Unix socket (run in a thread). *)

open Cumulo

let hex_decode h = String.init (String.length h / 2) (fun i -> Char.chr (int_of_string ("0x" ^ String.sub h (2 * i) 2)))
let hex_encode s = String.concat "" (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))

let read_file path = let ic = open_in_bin path in Fun.protect ~finally:(fun () -> close_in ic) (fun () -> really_input_string ic (in_channel_length ic))

(* ------------------------------------------------------------ vectors *)

let vectors_dir () =
  let candidates =
    [ Sys.getenv_opt "CUMULO_VECTORS"; Some "../../proto/vectors"; Some "../../../../../proto/vectors";
      Some "../../../../proto/vectors"; Some "../../../proto/vectors" ]
  in
  match List.find_opt (function Some d -> Sys.file_exists d && Sys.is_directory d | None -> false) candidates with
  | Some (Some d) -> d
  | _ -> failwith "proto/vectors not found (set CUMULO_VECTORS)"

let message_of typ f : Codec.message =
  let i k = Json.to_int (Json.member k f) and s k = Json.to_string (Json.member k f) in
  let h k = hex_decode (s k) in
  let send () : Codec.send =
    { trans_id = h "trans_id"; timeout = i "timeout"; priority = i "priority"; flags = i "flags"; name = s "name";
      request_info = h "request_info"; request = h "request" }
  in
  let answer () : Codec.answer =
    { trans_id = h "trans_id"; status = i "status"; response_info = h "response_info"; response = h "response" }
  in
  match typ with
  | "HELLO" ->
    Hello { version = i "version"; window = i "window"; thread_index = i "thread_index"; token = s "token";
            prefix = s "prefix" }
  | "SUBSCRIBE" -> Subscribe { req_id = i "req_id"; pattern = s "pattern" }
  | "UNSUBSCRIBE" -> Unsubscribe { req_id = i "req_id"; pattern = s "pattern" }
  | "SUBSCRIBE_COUNT" -> Subscribe_count { req_id = i "req_id"; pattern = s "pattern" }
  | "SEND_ASYNC" -> Send_async (send ())
  | "SEND_SYNC" -> Send_sync (send ())
  | "MCAST_ASYNC" -> Mcast_async (send ())
  | "FORWARD" -> Forward (send ())
  | "RETURN" -> Return (answer ())
  | "RESPONSE" -> Response (answer ())
  | "PING" -> Ping (Json.to_int64 (Json.member "nonce" f))
  | "PONG" -> Pong (Json.to_int64 (Json.member "nonce" f))
  | "GOODBYE" -> Goodbye
  | "WELCOME" ->
    Welcome
      { version = i "version"; node_id = i "node_id"; instance_id = i "instance_id";
        process_index = i "process_index"; process_count = i "process_count"; thread_count = i "thread_count";
        window = i "window"; max_frame = i "max_frame"; timeout_async = i "timeout_async";
        timeout_sync = i "timeout_sync"; timeout_terminate = i "timeout_terminate";
        priority_default = i "priority_default"; keepalive = i "keepalive"; prefix = s "prefix" }
  | "REQUEST" ->
    Request
      { trans_id = h "trans_id"; timeout = i "timeout"; priority = i "priority"; flags = i "flags";
        source = Json.to_int64 (Json.member "source" f); name = s "name"; pattern = s "pattern";
        request_info = h "request_info"; request = h "request"; sync = i "flags" land 1 <> 0;
        mcast = i "flags" land 2 <> 0 }
  | "REPLY" -> Reply { req_id = i "req_id"; status = i "status"; value = i "value"; message = s "message" }
  | "MCAST_SENT" ->
    Mcast_sent
      { trans_id = h "trans_id";
        trans_ids = List.map (fun t -> hex_decode (Json.to_string t)) (Json.to_list (Json.member "trans_ids" f)) }
  | "TERMINATE" -> Terminate (i "timeout")
  | "ERROR" -> Error { status = i "status"; message = s "message" }
  | other -> failwith ("unknown type in a vector: " ^ other)

let status_of_name name =
  let rec find code = if Status.to_string (Status.of_code code) = name then Status.of_code code else find (code + 1) in
  find 0

let vector_tests () =
  let dir = vectors_dir () in
  let files = List.sort compare (List.filter (fun f -> Filename.check_suffix f ".json") (Array.to_list (Sys.readdir dir))) in
  List.concat_map
    (fun file ->
      let doc = Json.parse (read_file (Filename.concat dir file)) in
      let name v = file ^ ": " ^ Json.to_string (Json.member "name" v) in
      let hex v = hex_decode (Json.to_string (Json.member "hex" v)) in
      let valid = Json.to_list (Json.member "vectors" doc) in
      let invalid = match Json.member_opt "invalid" doc with Some l -> Json.to_list l | None -> [] in
      if file = "kv.json" then
        List.map
          (fun v ->
            Alcotest.test_case (name v) `Quick (fun () ->
                let pairs =
                  List.map
                    (fun p -> match Json.to_list p with [ k; v ] -> (Json.to_string k, Json.to_string v) | _ -> assert false)
                    (Json.to_list (Json.member "pairs" v))
                in
                Alcotest.(check (list (pair string string))) "parse" pairs (info_parse (hex v));
                Alcotest.(check string) "encode" (hex_encode (hex v)) (hex_encode (info_encode pairs))))
          valid
        @ List.map
            (fun v ->
              Alcotest.test_case (name v) `Quick (fun () ->
                  match info_parse (hex v) with
                  | _ -> Alcotest.fail "accepted"
                  | exception Error (Status.Malformed, _) -> ()))
            invalid
      else
        List.map
          (fun v ->
            Alcotest.test_case (name v) `Quick (fun () ->
                let expected = message_of (Json.to_string (Json.member "type" v)) (Json.member "fields" v) in
                Alcotest.(check bool) "decoded fields" true (Codec.decode (hex v) = expected);
                Alcotest.(check string) "encoded bytes" (hex_encode (hex v)) (hex_encode (Codec.encode expected))))
          valid
        @ List.map
            (fun v ->
              Alcotest.test_case (name v) `Quick (fun () ->
                  let status = status_of_name (Json.to_string (Json.member "error" v)) in
                  match Codec.decode ~limit:1024 (hex v) with
                  | _ -> Alcotest.fail "accepted"
                  | exception Error (got, _) -> Alcotest.(check string) "status" (Status.to_string status) (Status.to_string got)))
            invalid)
    files

(* ------------------------------------------------------------ fake core *)

module Fake = struct
  type peer = { fd : Unix.file_descr; mutable buf : string }
  type 'a core = { path : string; listen : Unix.file_descr; thread : Thread.t; result : ('a, exn) result option ref }

  let counter = ref 0

  let start script =
    incr counter;
    let path = Printf.sprintf "/tmp/cumulo-ocaml-test-%d-%d.sock" (Unix.getpid ()) !counter in
    (try Unix.unlink path with Unix.Unix_error _ -> ());
    let listen = Unix.socket Unix.PF_UNIX Unix.SOCK_STREAM 0 in
    Unix.bind listen (Unix.ADDR_UNIX path);
    Unix.listen listen 8;
    let result = ref None in
    let thread = Thread.create (fun () -> result := Some (try Ok (script listen) with e -> Error e)) () in
    { path; listen; thread; result }

  let join core =
    Thread.join core.thread;
    Unix.close core.listen;
    (try Unix.unlink core.path with Unix.Unix_error _ -> ());
    match !(core.result) with Some (Ok v) -> v | Some (Error e) -> raise e | None -> assert false

  let accept listen =
    match Unix.select [ listen ] [] [] 5.0 with
    | [], _, _ -> failwith "fake core: nobody connected"
    | _ -> { fd = fst (Unix.accept listen); buf = "" }

  let rec expect peer =
    let n = String.length peer.buf in
    if n >= 4 && n >= 4 + Codec.length_at peer.buf 0 then begin
      let len = 4 + Codec.length_at peer.buf 0 in
      let frame = String.sub peer.buf 0 len in
      peer.buf <- String.sub peer.buf len (n - len);
      Codec.decode ~limit:max_int frame
    end
    else begin
      (match Unix.select [ peer.fd ] [] [] 5.0 with [], _, _ -> failwith "fake core: no frame came" | _ -> ());
      let b = Bytes.create 65536 in
      let got = Unix.read peer.fd b 0 65536 in
      if got = 0 then failwith "fake core: the instance closed";
      peer.buf <- peer.buf ^ Bytes.sub_string b 0 got;
      expect peer
    end

  let send_raw peer s = ignore (Unix.write_substring peer.fd s 0 (String.length s))

  let send_raw_all peer s =
    let rec go pos = if pos < String.length s then go (pos + Unix.write_substring peer.fd s pos (String.length s - pos)) in
    go 0
  let send peer m = send_raw peer (Codec.encode m)

  let welcome ?(max_frame = 1048576) window : Codec.message =
    Welcome
      { version = 1; node_id = 3; instance_id = 9; process_index = 1; process_count = 2; thread_count = 4; window;
        max_frame; timeout_async = 700; timeout_sync = 800; timeout_terminate = 900; priority_default = -2;
        keepalive = 5000; prefix = "/t/" }

  (* Accepts an instance: its HELLO, answered with WELCOME. *)
  let accept_instance ?max_frame listen =
    let peer = accept listen in
    match expect peer with
    | Hello h as hello -> send peer (welcome ?max_frame h.window); (peer, hello)
    | m -> failwith ("fake core: HELLO expected, got " ^ Codec.type_name m)

  (* Reads a control request, answers its REPLY. *)
  let reply ?(status = 0) ?(value = 0) ?(message = "") peer =
    match expect peer with
    | Subscribe { req_id; pattern } | Unsubscribe { req_id; pattern } | Subscribe_count { req_id; pattern } ->
      send peer (Reply { req_id; status; value; message });
      pattern
    | m -> failwith ("fake core: a control request expected, got " ^ Codec.type_name m)
end

let tid_a = hex_decode "187a2b1b40fdcd150000000300000001"
let tid_b = hex_decode "187a2b1b40fdcd160000000300000001"

let request ?(pattern = "/t/echo") ?(priority = 0) ?(request = "hi") ?(request_info = "") trans_id : Codec.message =
  Request
    { trans_id; timeout = 500; priority; flags = 1; source = 0x3_0000_0001L; name = pattern; pattern; request_info; request;
      sync = true; mcast = false }

let connect ?window ?thread_index (core : _ Fake.core) = create ~socket:core.path ~token:"" ~prefix:"/t/" ?window ?thread_index ()

let error_of f = match f () with _ -> Alcotest.fail "no error" | exception Error (status, message) -> (Status.to_string status, message)

let answer_of = function Codec.Return a -> a | m -> Alcotest.fail ("RETURN expected, got " ^ Codec.type_name m)

let check_string = Alcotest.(check string)
let check_int = Alcotest.(check int)

let handshake () =
  let core =
    Fake.start (fun l ->
        let peer, hello = Fake.accept_instance l in
        let a = Fake.expect peer and b = Fake.expect peer in
        (hello, a, b))
  in
  let api = connect ~thread_index:2 ~window:4 core in
  let first = send_async api "/x" "1" in
  let second = send_async api "/x" "2" in
  let hello, a, b = Fake.join core in
  Alcotest.(check bool) "HELLO" true (hello = Hello { version = 1; window = 4; thread_index = 2; token = ""; prefix = "/t/" });
  (match (a, b) with
   | Send_async x, Send_async y -> check_string "first" (hex_encode first) (hex_encode x.trans_id); check_string "second" (hex_encode second) (hex_encode y.trans_id)
   | _ -> Alcotest.fail "two SEND_ASYNC");
  Alcotest.(check (list int)) "ids" [ 3; 9; 1; 2; 4; 2; 4; 700; 800; 900; -2; 1048576; 5000 ]
    [ node_id api; instance_id api; process_index api; process_count api; thread_count api; thread_index api; window api;
      timeout_async api; timeout_sync api; timeout_terminate api; priority_default api; max_frame api; keepalive api ];
  check_string "prefix" "/t/" (prefix api);
  check_string "ids in the trans_id" "0000000300000009" (hex_encode (String.sub first 8 8));
  Alcotest.(check bool) "increasing" true (second > first);
  let seconds = Int64.to_float (String.get_int64_be first 0) /. 1e9 in
  Alcotest.(check bool) "time" true (abs_float (seconds -. Unix.gettimeofday ()) < 5.);
  close api

let managed_hello () =
  let core = Fake.start (fun l -> snd (Fake.accept_instance l)) in
  let api = create ~socket:core.path ~token:"c0ffee" ~prefix:"/ignored/" ~thread_index:1 () in
  (match Fake.join core with
   | Hello h -> check_string "token" "c0ffee" h.token; check_string "no prefix" "" h.prefix; check_int "index" 1 h.thread_index
   | _ -> Alcotest.fail "HELLO");
  close api

let error_instead_of_welcome () =
  let core =
    Fake.start (fun l ->
        let peer = Fake.accept l in
        ignore (Fake.expect peer);
        Fake.send peer (Error { status = 11; message = "unknown token" }))
  in
  let e = error_of (fun () -> create ~socket:core.path ~token:"bad" ()) in
  Fake.join core;
  Alcotest.(check (pair string string)) "error" ("UNAUTHORIZED", "unknown token") e

let unmanaged_needs_prefix () =
  check_string "no prefix" "INVALID_ARGUMENT" (fst (error_of (fun () -> create ~socket:"/nonexistent" ~token:"" ())));
  check_string "no socket" "SHUTTING_DOWN" (fst (error_of (fun () -> create ~socket:"/nonexistent/s" ~token:"" ~prefix:"/t/" ())))

let subscriptions () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        let a = Fake.reply peer in
        let b = Fake.reply ~value:2 peer in
        let c = Fake.reply ~status:9 ~message:"not subscribed" peer in
        [ a; b; c ])
  in
  let api = connect core in
  subscribe api "a/*" (fun _ _ -> ("", "x"));
  check_int "count" 2 (subscribe_count api "a/*");
  Alcotest.(check (pair string string)) "error REPLY" ("INVALID_ARGUMENT", "not subscribed") (error_of (fun () -> unsubscribe api "zz"));
  Alcotest.(check (list string)) "patterns" [ "a/*"; "a/*"; "zz" ] (Fake.join core);
  close api

let request_return_terminate () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        Fake.send peer (request ~request_info:"a\0001\000" tid_a);
        let returned = Fake.expect peer in
        Fake.send peer (Terminate 100);
        let bye = Fake.expect peer in
        (returned, bye))
  in
  let api = connect core in
  let seen = ref None in
  subscribe api "echo" (fun _ r -> seen := Some r; (info_encode [ ("content-type", "text/plain") ], "echo: " ^ r.request));
  Alcotest.(check bool) "poll false after TERMINATE" false (poll api);
  Alcotest.(check bool) "terminated" true (is_terminated api);
  close api;
  let returned, bye = Fake.join core in
  let a = answer_of returned in
  check_string "trans_id" (hex_encode tid_a) (hex_encode a.trans_id);
  check_int "status" 0 a.status;
  check_string "info" "content-type\000text/plain\000" a.response_info;
  check_string "response" "echo: hi" a.response;
  Alcotest.(check bool) "GOODBYE" true (bye = Goodbye);
  match !seen with
  | Some r ->
    Alcotest.(check bool) "sync, not mcast" true (r.sync && not r.mcast);
    Alcotest.(check bool) "source" true (r.source = 0x3_0000_0001L);
    Alcotest.(check (list (pair string string))) "request_info" [ ("a", "1") ] (info_parse r.request_info)
  | None -> Alcotest.fail "handler not run"

let poll_times_out () =
  let core = Fake.start (fun l -> let peer, _ = Fake.accept_instance l in Thread.delay 0.5; peer) in
  let api = connect core in
  let t0 = Unix.gettimeofday () in
  Alcotest.(check bool) "true on timeout" true (poll ~timeout:50 api);
  Alcotest.(check bool) "waited" true (Unix.gettimeofday () -. t0 >= 0.05);
  ignore (Fake.join core);
  close api

let send_sync_keeps_other_frames () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        let async = match Fake.expect peer with Send_async s -> s.trans_id | _ -> failwith "SEND_ASYNC" in
        let sync = match Fake.expect peer with Send_sync s -> s.trans_id | _ -> failwith "SEND_SYNC" in
        Fake.send peer (Ping 0xfedcba9876543210L);
        let pong = Fake.expect peer in
        Fake.send peer (request tid_a);
        Fake.send peer (Response { trans_id = async; status = 0; response_info = ""; response = "later" });
        Fake.send peer (Response { trans_id = sync; status = 0; response_info = "k\000v\000"; response = "now" });
        let returned = Fake.expect peer in
        Fake.send peer (Terminate 100);
        (pong, returned))
  in
  let api = connect core in
  subscribe api "echo" (fun _ r -> ("", r.request));
  let async = send_async api "/a" "p" in
  Alcotest.(check (pair string string)) "send_sync" ("k\000v\000", "now") (send_sync api "/s" "q");
  let t, info, response = recv_async api () in
  check_string "kept" (hex_encode async) (hex_encode t);
  check_string "kept body" "later" response;
  check_string "kept info" "" info;
  Alcotest.(check bool) "poll" false (poll api);
  let pong, returned = Fake.join core in
  Alcotest.(check bool) "PONG" true (pong = Pong 0xfedcba9876543210L);
  check_string "queued request served" "hi" (answer_of returned).response;
  close api

let error_responses () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        (match Fake.expect peer with
         | Send_sync s -> Fake.send peer (Response { trans_id = s.trans_id; status = 2; response_info = ""; response = "nobody" })
         | _ -> failwith "SEND_SYNC");
        match Fake.expect peer with
        | Send_async s -> Fake.send peer (Response { trans_id = s.trans_id; status = 42; response_info = ""; response = "new" })
        | _ -> failwith "SEND_ASYNC")
  in
  let api = connect core in
  Alcotest.(check (pair string string)) "NO_SERVICE" ("NO_SERVICE", "nobody") (error_of (fun () -> send_sync api "/n" ""));
  let t = send_async api "/m" "" in
  Alcotest.(check (pair string string)) "unknown code" ("42", "new") (error_of (fun () -> recv_async api ~trans_id:t ()));
  Fake.join core;
  close api

exception Faulty_error of string

let failing_and_missing_handlers () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        ignore (Fake.reply peer);
        Fake.send peer (request ~pattern:"/t/boom" tid_a);
        Fake.send peer (request ~pattern:"/t/gone" tid_b);
        Fake.send peer (request ~pattern:"/t/ok" tid_b);
        let r = List.init 3 (fun _ -> answer_of (Fake.expect peer)) in
        Fake.send peer (Terminate 100);
        r)
  in
  let api = connect core in
  subscribe api "boom" (fun _ _ -> raise (Faulty_error "boom from ocaml"));
  subscribe api "ok" (fun _ _ -> ("", "ok"));
  Alcotest.(check bool) "poll" false (poll api);
  (match Fake.join core with
   | [ boom; gone; ok ] ->
     check_int "SERVICE_ERROR" 7 boom.status;
     Alcotest.(check bool) ("names the exception: " ^ boom.response) true
       (Str_contains.contains boom.response "Faulty_error" && Str_contains.contains boom.response "boom from ocaml");
     check_int "NO_SERVICE" 2 gone.status;
     check_string "no handler" "no handler for /t/gone" gone.response;
     check_string "ok" "ok" ok.response
   | _ -> assert false);
  close api

let mcast_and_recv_async () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        match Fake.expect peer with
        | Mcast_async s ->
          (* a copy's answer before MCAST_SENT: either order is accepted *)
          Fake.send peer (Response { trans_id = tid_b; status = 0; response_info = ""; response = "b" });
          Fake.send peer (Mcast_sent { trans_id = s.trans_id; trans_ids = [ tid_a; tid_b ] });
          Fake.send peer (Response { trans_id = tid_a; status = 0; response_info = ""; response = "a" });
          s.name
        | _ -> failwith "MCAST_ASYNC")
  in
  let api = connect core in
  Alcotest.(check (list string)) "copies" [ hex_encode tid_a; hex_encode tid_b ] (List.map hex_encode (mcast_async api "/m/*" "x"));
  let _, _, a = recv_async api ~trans_id:tid_a () in
  let t, _, b = recv_async api () in
  check_string "a" "a" a;
  check_string "b" "b" b;
  check_string "b's id" (hex_encode tid_b) (hex_encode t);
  check_string "nothing more" "TIMEOUT" (fst (error_of (fun () -> recv_async api ~timeout:10 ())));
  check_string "name" "/m/*" (Fake.join core);
  close api

let forward_sends_no_return () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        Fake.send peer (request ~priority:5 tid_a);
        let forward = Fake.expect peer in
        Fake.send peer (Terminate 100);
        (forward, Fake.expect peer))
  in
  let api = connect core in
  subscribe api "echo" (fun api r -> forward api ~request:"moved" r "/else"; ("", "ignored"));
  Alcotest.(check bool) "poll" false (poll api);
  close api;
  let forward, next = Fake.join core in
  Alcotest.(check bool) "FORWARD" true
    (forward = Forward { trans_id = tid_a; timeout = 500; priority = 5; flags = 0; name = "/else"; request_info = ""; request = "moved" });
  Alcotest.(check bool) "then GOODBYE, no RETURN" true (next = Goodbye)

(* PROTOCOL.md 5.1: a handler's sends and forward inherit the traceparent and
   tracestate of the request it handles, after the pairs it gave; a
   handler-given traceparent is kept; a request without one, a failed
   handler's context, and a call outside any handler add nothing. *)
let trace_context () =
  let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" in
  let trace = info_encode [ ("traceparent", parent); ("tracestate", "congo=t61rcWkgMzE") ] in
  let parent_only = info_encode [ ("traceparent", parent) ] in
  let own = info_encode [ ("traceparent", "00-own") ] in
  let info_of = function
    | Codec.Send_sync s | Send_async s | Mcast_async s | Forward s -> s
    | m -> failwith ("fake core: a send expected, got " ^ Codec.type_name m)
  in
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        ignore (Fake.reply peer);
        Fake.send peer (request ~request_info:("a\0001\000" ^ trace) tid_a);
        let sync = info_of (Fake.expect peer) in
        Fake.send peer (Response { trans_id = sync.trans_id; status = 0; response_info = ""; response = "" });
        let async = info_of (Fake.expect peer) in
        let mcast = info_of (Fake.expect peer) in
        Fake.send peer (Mcast_sent { trans_id = mcast.trans_id; trans_ids = [] });
        let kept = info_of (Fake.expect peer) in
        let forwarded = info_of (Fake.expect peer) in
        (* a traceparent without tracestate; a handler that fails: its context goes with it *)
        Fake.send peer (request ~pattern:"/t/boom" ~request_info:parent_only tid_b);
        let boom = info_of (Fake.expect peer) in
        check_int "boom fails" 7 (answer_of (Fake.expect peer)).status;
        (* a request without traceparent *)
        Fake.send peer (request ~request_info:"tracestate\000x=1\000" tid_a);
        let plain = info_of (Fake.expect peer) in
        ignore (answer_of (Fake.expect peer));
        Fake.send peer (Terminate 100);
        let outside = info_of (Fake.expect peer) in
        List.map (fun (s : Codec.send) -> s.request_info) [ sync; async; mcast; kept; forwarded; boom; plain; outside ])
  in
  let api = connect core in
  subscribe api "echo" (fun api r ->
      if Info.lookup r.request_info "traceparent" = None then
        ignore (send_async api ~request_info:r.request_info "/plain" "")
      else begin
        ignore (send_sync api "/s" "");
        ignore (send_async api ~request_info:"k\000v\000" "/a" "");
        ignore (mcast_async api "/m" "");
        ignore (send_async api ~request_info:own "/own" "");
        forward api ~request_info:"" r "/f"
      end;
      ("", ""));
  subscribe api "boom" (fun api _ -> ignore (send_async api "/b" ""); raise (Faulty_error "boom"));
  Alcotest.(check bool) "poll" false (poll api);
  ignore (send_async api "/outside" "");
  Alcotest.(check (list string)) "request_info of each call"
    (List.map hex_encode [ trace; "k\000v\000" ^ trace; trace; own; trace; parent_only; "tracestate\000x=1\000"; "" ])
    (List.map hex_encode (Fake.join core));
  close api

let frames_over_the_limit () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance ~max_frame:100 l in
        ignore (Fake.reply peer);
        let small = Fake.expect peer in
        Fake.send peer (request ~pattern:"/t/big" tid_a);
        let returned = answer_of (Fake.expect peer) in
        let b = Bytes.create 5 in
        Bytes.set_int32_le b 0 (Int32.of_int (100 + 8 + 2 + 65535 + 1));
        Bytes.set b 4 '\x82';
        Fake.send_raw peer (Bytes.to_string b);
        (small, returned))
  in
  let api = connect core in
  subscribe api "big" (fun _ _ -> ("", String.make 200 'x'));
  check_string "send refused" "TOO_LARGE" (fst (error_of (fun () -> send_async api "/big" (String.make 200 'x'))));
  ignore (send_async api "/small" "");
  check_string "read refused" "TOO_LARGE" (fst (error_of (fun () -> poll ~timeout:5000 api)));
  let small, returned = Fake.join core in
  (match small with Send_async s -> check_string "the small one" "/small" s.name | _ -> Alcotest.fail "SEND_ASYNC");
  check_int "answer TOO_LARGE" 8 returned.status;
  close api

let send_sync_timeout () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        let t = match Fake.expect peer with Send_sync s -> s.trans_id | _ -> failwith "SEND_SYNC" in
        let t2 = match Fake.expect peer with Send_async s -> s.trans_id | _ -> failwith "SEND_ASYNC" in
        Fake.send peer (Response { trans_id = t; status = 0; response_info = ""; response = "late" });
        Fake.send peer (Response { trans_id = t2; status = 0; response_info = ""; response = "kept" }))
  in
  let api = connect core in
  check_string "timeout" "TIMEOUT" (fst (error_of (fun () -> send_sync api ~timeout:20 "/slow" "")));
  ignore (send_async api "/b" "");
  let _, _, r = recv_async api () in
  check_string "late answer dropped" "kept" r;
  Fake.join core;
  close api

let window_in_order () =
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance l in
        ignore (Fake.reply peer);
        let frames = List.map (fun n -> Codec.encode (request ~request:(string_of_int n) (String.make 15 '\000' ^ String.make 1 (Char.chr n)))) [ 1; 2; 3 ] in
        Fake.send_raw peer (String.concat "" frames ^ Codec.encode (Terminate 9));
        List.init 3 (fun _ -> (answer_of (Fake.expect peer)).response))
  in
  let api = connect ~window:3 core in
  subscribe api "echo" (fun _ r -> ("", r.request));
  Alcotest.(check bool) "poll" false (poll api);
  Alcotest.(check (list string)) "in order" [ "1"; "2"; "3" ] (Fake.join core);
  close api

let stream_cut_every_way () =
  let big = String.concat "" (List.init (3 * 65536) (fun _ -> "0123456789abcdef")) in
  let core =
    Fake.start (fun l ->
        let peer, _ = Fake.accept_instance ~max_frame:(4 * 1024 * 1024) l in
        ignore (Fake.reply peer);
        (* a frame cut inside its length field, then inside its body *)
        let frame = Codec.encode (request ~request:big tid_a) in
        let n = String.length frame in
        List.iter
          (fun (pos, len) -> Fake.send_raw_all peer (String.sub frame pos len); Thread.delay 0.02)
          [ (0, 2); (2, 1000); (1002, n - 1002) ];
        (* then two frames and the start of a third in one write, the rest later *)
        let small = List.map (fun c -> Codec.encode (request ~request:(String.make 1 c) tid_b)) [ 'a'; 'b'; 'c' ] in
        let third = List.nth small 2 in
        Fake.send_raw_all peer (List.nth small 0 ^ List.nth small 1 ^ String.sub third 0 10);
        Thread.delay 0.02;
        Fake.send_raw_all peer (String.sub third 10 (String.length third - 10) ^ Codec.encode (Terminate 9));
        List.init 4 (fun _ -> (answer_of (Fake.expect peer)).response))
  in
  let api = connect core in
  subscribe api "echo" (fun _ r -> ("", r.request));
  Alcotest.(check bool) "poll" false (poll api);
  (match Fake.join core with
   | echoed :: rest ->
     Alcotest.(check bool) "the big one echoed" true (echoed = big);
     Alcotest.(check (list string)) "then the small ones" [ "a"; "b"; "c" ] rest
   | [] -> assert false);
  close api

let run_one_thread_per_instance () =
  let core =
    Fake.start (fun l ->
        let peers = List.init 2 (fun _ -> Fake.accept_instance l) in
        List.iter (fun (p, _) -> ignore (Fake.reply p)) peers;
        List.iter (fun (p, _) -> Fake.send p (Terminate 100)) peers;
        let byes = List.map (fun (p, _) -> Fake.expect p) peers in
        (List.sort compare (List.map (function _, Codec.Hello h -> h.thread_index | _ -> -1) peers), byes))
  in
  run ~thread_count:2 ~socket:core.path ~prefix:"/t/" (fun api -> subscribe api "echo" (fun _ _ -> ("", "")));
  let indexes, byes = Fake.join core in
  Alcotest.(check (list int)) "thread indexes" [ 0; 1 ] indexes;
  Alcotest.(check bool) "GOODBYEs" true (List.for_all (fun m -> m = Codec.Goodbye) byes)

let info () =
  check_string "encode" "a\0001\000b\000x\000" (info_encode [ ("a", "1"); ("b", "x") ]);
  Alcotest.check_raises "NUL" (Invalid_argument "Cumulo.Info.encode: NUL in a key or value") (fun () -> ignore (info_encode [ ("a\000", "") ]));
  Alcotest.(check (option string)) "lookup" (Some "v") (Info.lookup "k\000v\000" "k");
  Alcotest.(check (option string)) "lookup malformed" None (Info.lookup "k\000" "k")

let statuses () =
  Alcotest.(check int) "UNAVAILABLE is 13" 13 (Status.to_code Status.Unavailable);
  Alcotest.(check string) "13 is UNAVAILABLE" "UNAVAILABLE" (Status.to_string (Status.of_code 13));
  Alcotest.(check string) "14 is unknown" "14" (Status.to_string (Status.of_code 14));
  for code = 0 to 13 do
    Alcotest.(check int) "code round trip" code (Status.to_code (Status.of_code code))
  done

let () =
  Alcotest.run "cumulo"
    [ ("vectors", vector_tests ());
      ( "session",
        List.map
          (fun (name, f) -> Alcotest.test_case name `Quick f)
          [ ("handshake sends HELLO and exposes WELCOME", handshake);
            ("a managed HELLO sends the token and no prefix", managed_hello);
            ("ERROR instead of WELCOME", error_instead_of_welcome);
            ("unmanaged instances need a prefix and a socket", unmanaged_needs_prefix);
            ("subscribe, unsubscribe, subscribe_count", subscriptions);
            ("a REQUEST is RETURNed, TERMINATE ends poll", request_return_terminate);
            ("poll returns true on timeout", poll_times_out);
            ("send_sync answers PING and keeps other frames", send_sync_keeps_other_frames);
            ("error responses carry their status", error_responses);
            ("failing and missing handlers", failing_and_missing_handlers);
            ("mcast_async and recv_async", mcast_and_recv_async);
            ("forward sends no RETURN", forward_sends_no_return);
            ("a handler's calls carry its request's trace context", trace_context);
            ("frames over the limit, both ways", frames_over_the_limit);
            ("send_sync gives up; its late answer is dropped", send_sync_timeout);
            ("a window of requests answered in order", window_in_order);
            ("the stream cut every way, a 3 MiB frame", stream_cut_every_way);
            ("run: one thread per instance", run_one_thread_per_instance);
            ("key/value", info);
            ("status codes and names", statuses) ] ) ]
