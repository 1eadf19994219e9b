(* The ATS2 SDK's test program: every vector of proto/vectors through the
** codec (decoded, each field compared, encoded back to the same bytes,
** invalid ones rejected with their status), the key/value helpers, and an
** instance's session against a fake core on the other end of a socketpair.
** Prints "N passed, N failed"; exits 1 on any failure.
**
**   test_ats2 VECTORS.tsv      (test/vectors_tsv.py writes it)
*)

#include "share/atspre_staload.hats"

staload CUMULO = "SATS/cumulo.sats"
staload "SATS/cumulo.sats"

%{^
#include "test/testing.cats"
%}

extern fun check (ok: bool, what: string): void = "mac#testing_check"
extern fun summary (): int = "mac#testing_summary"
extern fun open_lines (path: string): bool = "mac#testing_open"
extern fun next_line (): int = "mac#testing_next_line"
extern fun col (i: int): string = "mac#testing_col"
extern fun col_key (i: int): string = "mac#testing_col_key"
extern fun col_value (i: int): string = "mac#testing_col_value"
extern fun streq (a: string, b: string): bool = "mac#testing_streq"
extern fun concat (a: string, b: string): string = "mac#testing_concat"
extern fun decode_hex (hex: string, max_frame: uint): int = "mac#testing_decode_hex"
extern fun type_of_frame (): string = "mac#testing_type_of_frame"
extern fun field (name: string): string = "mac#testing_field"
extern fun reencode_hex (): string = "mac#testing_reencode_hex"
extern fun kv_decode_hex (hex: string): int = "mac#testing_kv_decode_hex"
extern fun kv_current (): bytes = "mac#testing_kv_current"
extern fun socketpair (): int = "mac#testing_socketpair"
extern fun send_welcome (max_frame: uint): void = "mac#testing_send_welcome"
extern fun send_reply (req_id: uint, status: int, value: uint): void = "mac#testing_send_reply"
extern fun send_request (tid: int, pattern: string, body: string): void = "mac#testing_send_request"
extern fun send_request_info (tid: int, pattern: string, info: bytes, body: string): void = "mac#testing_send_request_info"
extern fun send_ping (nonce: ullint): void = "mac#testing_send_ping"
extern fun send_terminate (): void = "mac#testing_send_terminate"
extern fun send_response_to_last (status: int, body: string): void = "mac#testing_send_response_to_last"
extern fun recv_frame (): int = "mac#testing_recv"
extern fun peer_closed (): bool = "mac#testing_peer_closed"
extern fun big_string (n: int): string = "mac#testing_big_string"

macdef MAX_FRAME = 4294967295u

fun hex_of (s: string): string = bytes_hex (bytes_of_string s)

(* ****** ****** vectors *)

fun check_fields (name: string, i: int, n: int): void =
  if i < n then let
    val key = col_key i
    val got = field key
  in
    check (streq (got, col_value i), concat (concat (name, ": field "), concat (key, concat (" is ", got))));
    check_fields (name, i + 1, n)
  end

fun frame_vector (n: int): void = let
  val name = col 1
  val rc = decode_hex (col 2, MAX_FRAME)
in
  check (rc = 0, concat ("decode ", name));
  if rc = 0 then begin
    check (streq (type_of_frame (), col 3), concat ("type of ", name));
    check_fields (name, 4, n);
    check (streq (reencode_hex (), col 2), concat ("encode ", name))
  end
end

fun invalid_vector (): void = let
  val rc = decode_hex (col 2, 1024u)
in
  check (rc > 0 && streq (status_name rc, col 3), concat ("reject ", col 1))
end

fun kv_pairs_match (pairs: List0 info_pair, i: int, n: int): bool =
  case+ pairs of
  | list_nil () => i = n
  | list_cons (kv, rest) =>
      i < n && streq (concat (bytes_hex kv.0, concat ("=", bytes_hex kv.1)), col i) && kv_pairs_match (rest, i + 1, n)

fun kv_vector (n: int): void = let
  val rc = kv_decode_hex (col 2)
  val bytes = kv_current ()
in
  check (rc = 0, concat ("validate kv ", col 1));
  case+ info_parse bytes of
  | Some pairs => check (kv_pairs_match (pairs, 3, n), concat ("parse kv ", col 1))
  | None () => check (false, concat ("parse kv ", col 1))
end

fun kv_invalid (): void = let
  val rc = kv_decode_hex (col 2)
in
  check (rc > 0 && streq (status_name rc, col 3), concat ("reject kv ", col 1));
  case+ info_parse (kv_current ()) of
  | Some _ => check (false, concat ("info_parse rejects ", col 1))
  | None () => check (true, "")
end

fun vectors (): int = let
  val n = next_line ()
in
  if n = 0 then 0
  else begin
    (if streq (col 0, "frame") then frame_vector n
     else if streq (col 0, "invalid") then invalid_vector ()
     else if streq (col 0, "kv") then kv_vector n
     else kv_invalid ());
    1 + vectors ()
  end
end

(* ****** ****** key/value helpers *)

fun test_info (): void = let
  val b = info_encode ($list{@(string, string)}(@("value", "42"), @("a", "")))
  var value: bytes
  var found: bool
  var value2: bytes
  var found2: bool
  val rc = info_find (b, "value", value, found)
  val rc2 = info_find (bytes_of_string "x", "value", value2, found2)
in
  check (streq (bytes_hex b, "76616c756500343200610000"), "info_encode");
  check (rc = 0 && found, "info_find status");
  check (streq (bytes_hex value, hex_of "42"), "info_find value");
  check (rc2 = 5, "info_find of malformed bytes is MALFORMED");
  bytes_free b
end

fun test_hex (): void = let
  val b = bytes_of_hex "00ff10"
  val bad = bytes_of_hex "0g"
  val odd = bytes_of_hex "abc"
in
  check (bytes_valid b && bytes_length b = i2sz 3 && bytes_get (b, i2sz 1) = 255, "bytes_of_hex");
  check (~bytes_valid bad && ~bytes_valid odd, "bytes_of_hex of a non-hex digit, of an odd length");
  bytes_free b;
  bytes_free bad;
  bytes_free odd
end

(* ****** ****** the session against a fake core *)

fun echo (api: api, req: request, user: ptr): int = let
  val info = info_encode ($list{@(string, string)}(@("k", "v")))
  val rc = respond (api, req, info, bytes_of_string (concat ("got ", bytes_to_string (request_body req))))
in
  bytes_free info; rc
end

fun boom (api: api, req: request, user: ptr): int = status_invalid_argument

fun frame_is (typ: string): bool = recv_frame () >= 0 && streq (type_of_frame (), typ)

(* PROTOCOL.md 5.1: a handler's send_async and forward inherit the trace
** context of its request (the C SDK adds it). Every request gets a
** send_async with request_info a=b; "all" also one with its own
** traceparent, then a forward with a=b. *)
fun trace_parent (): string = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
fun trace_state (): string = "congo=t61rcWkgMzE"

(* "all": a send_async with its own traceparent, then a forward with a=b. *)
fun traced_all (api: api, req: request, given: bytes): int = let
  val own = info_encode ($list{@(string, string)}(@("traceparent", "mine")))
  var tid: trans_id
  val rc = send_async (api, "/svc/own", bytes_empty (), own, 0u, 300, tid)
  val () = bytes_free own
in
  if rc != 0 then rc else forward (api, req, "/svc/fwd", given, bytes_empty (), 0u, 300)
end

fun traced (api: api, req: request, user: ptr): int = let
  val given = info_encode ($list{@(string, string)}(@("a", "b")))
  var tid: trans_id
  val rc = send_async (api, "/svc/one", bytes_empty (), given, 0u, 300, tid)
  val rc = (if rc = 0 && streq (bytes_to_string (request_body req), "all") then traced_all (api, req, given) else rc): int
in
  bytes_free given; rc
end

fun info_hex (pairs: List0 @(string, string)): string = let
  val b = info_encode pairs
  val hex = bytes_hex b
in
  bytes_free b; hex
end

fun sent_info_is (typ: string, pairs: List0 @(string, string)): bool =
  frame_is typ && streq (field "request_info", info_hex pairs)

fun test_trace (api: api): void = let
  val () = send_reply (5u, 0, 0u)
  val () = check (subscribe (api, "trace", traced, the_null_ptr) = 0, "subscribe trace")
  val () = check (frame_is "SUBSCRIBE", "SUBSCRIBE trace")
  val tp = trace_parent ()
  val ts = trace_state ()
  val both = info_encode ($list{@(string, string)}(@("k", "v"), @("traceparent", tp), @("tracestate", ts)))
  val parent = info_encode ($list{@(string, string)}(@("traceparent", tp)))
  val no_parent = info_encode ($list{@(string, string)}(@("tracestate", ts)))
  val () = send_request_info (11, "/tests/trace", both, "all")
  val () = send_request_info (12, "/tests/trace", parent, "one")
  val () = send_request_info (13, "/tests/trace", no_parent, "one")
  val () = bytes_free both
  val () = bytes_free parent
  val () = bytes_free no_parent
  val () = check (poll (api, 300) = 0, "poll runs the traced handlers")
  val () = check (sent_info_is ("SEND_ASYNC", $list{@(string, string)}(@("a", "b"), @("traceparent", tp), @("tracestate", ts))),
                  "trace: send_async inherits traceparent and tracestate")
  val () = check (sent_info_is ("SEND_ASYNC", $list{@(string, string)}(@("traceparent", "mine"))),
                  "trace: a handler's own traceparent is kept")
  val () = check (sent_info_is ("FORWARD", $list{@(string, string)}(@("a", "b"), @("traceparent", tp), @("tracestate", ts))),
                  "trace: forward inherits traceparent and tracestate")
  val () = check (sent_info_is ("SEND_ASYNC", $list{@(string, string)}(@("a", "b"), @("traceparent", tp))),
                  "trace: traceparent alone when the request has no tracestate")
  val () = check (frame_is "RETURN", "trace: RETURN of the second request")
  val () = check (sent_info_is ("SEND_ASYNC", $list{@(string, string)}(@("a", "b"))),
                  "trace: a request without traceparent adds nothing")
  val () = check (frame_is "RETURN", "trace: RETURN of the third request")
  var tid: trans_id
  val () = check (send_async (api, "/svc/after", bytes_empty (), bytes_empty (), 0u, 300, tid) = 0, "send_async after the handlers")
in
  check (frame_is "SEND_ASYNC" && streq (field "request_info", ""), "trace: a call outside a handler adds nothing")
end

fun test_session (): void = let
  val fd = socketpair ()
  val () = send_welcome (1024u)
  val api = connect_fd (fd, "/client/")
  val () = check (~api_is_null api, "connect over the socketpair")
  val () = check (frame_is "HELLO" && streq (field "token", "") && streq (field "prefix", hex_of "/client/"), "HELLO unmanaged")
  val () = check (node_id api = 1u && instance_id api = 7u && max_frame api = 1024u && timeout_sync api = 5000u, "WELCOME's values")
  val () = check (priority_default api = ~2 && streq (service_prefix api, "/tests/") && keepalive api = 5000u, "WELCOME's prefix and priority")

  val () = send_reply (1u, 0, 0u)
  val () = check (subscribe (api, "echo", echo, the_null_ptr) = 0, "subscribe echo")
  val () = check (frame_is "SUBSCRIBE" && streq (field "pattern", hex_of "echo") && streq (field "req_id", "1"), "SUBSCRIBE frame")
  val () = send_reply (2u, 0, 0u)
  val () = check (subscribe (api, "boom", boom, the_null_ptr) = 0, "subscribe boom")
  val () = check (frame_is "SUBSCRIBE", "second SUBSCRIBE")
  val () = send_reply (3u, 9, 0u)
  val () = check (subscribe (api, "a**", boom, the_null_ptr) = 9, "a refused subscribe gives the REPLY's status")
  val () = check (frame_is "SUBSCRIBE", "third SUBSCRIBE")

  (* requests: answered, failed, without a handler; a PING *)
  val () = send_request (1, "/tests/echo", "hi")
  val () = send_request (2, "/tests/boom", "")
  val () = send_request (3, "/tests/none", "")
  val () = send_ping (12345678901234567890ULL)
  val () = check (poll (api, 300) = 0, "poll returns status_ok when its time is up")
  val () = check (frame_is "RETURN" && streq (field "status", "0") && streq (field "response", hex_of "got hi")
                  && streq (field "response_info", "6b007600"), "RETURN of the handler")
  val () = check (frame_is "RETURN" && streq (field "status", "7"), "a failing handler is SERVICE_ERROR")
  val () = check (frame_is "RETURN" && streq (field "status", "2"), "no handler is NO_SERVICE")
  val () = check (frame_is "PONG" && streq (field "nonce", "12345678901234567890"), "PING answered with PONG")

  (* send_async and recv_async *)
  var tid: trans_id
  val rc = send_async (api, "/svc/x", bytes_of_string "ping", bytes_empty (), 0u, 300, tid)
  val () = check (rc = 0, "send_async")
  val () = check (frame_is "SEND_ASYNC" && streq (field "name", hex_of "/svc/x") && streq (field "priority", "-2")
                  && streq (field "trans_id", trans_id_hex tid), "SEND_ASYNC frame, default priority")
  val () = check (string_length (trans_id_hex tid) = i2sz 32, "trans_id is 16 bytes")
  val () = send_response_to_last (0, "pong")
  var resp: response
  val () = check (recv_async (api, addr@tid, 2000, resp) = 0, "recv_async")
  val () = check (response_status resp = 0 && streq (bytes_to_string (response_body resp), "pong"), "recv_async's response")

  (* subscribe_count *)
  var count: uint
  val () = send_reply (4u, 0, 2u)
  val () = check (subscribe_count (api, "echo", count) = 0 && count = 2u, "subscribe_count")
  val () = check (frame_is "SUBSCRIBE_COUNT", "SUBSCRIBE_COUNT frame")

  (* the trace context (PROTOCOL.md 5.1) *)
  val () = test_trace api

  (* a send over max_frame is refused locally *)
  val big = bytes_of_string (big_string 2000)
  var tid2: trans_id
  val () = check (send_async (api, "/big", big, bytes_empty (), 0u, 300, tid2) = status_too_large, "TOO_LARGE locally")

  (* TERMINATE ends poll; close says GOODBYE *)
  val () = send_terminate ()
  val () = check (poll (api, ~1) = status_e_terminated, "poll ends on TERMINATE")
  val () = close api
in
  check (frame_is "GOODBYE", "GOODBYE on close");
  check (peer_closed (), "the connection is closed")
end

implement main0 (argc, argv) = let
  val path = if argc > 1 then argv[1] else "build/vectors.tsv"
  val () = if ~open_lines path then check (false, concat ("open ", path))
  val n = vectors ()
  val () = check (n >= 50, "read every vector")
  val () = test_info ()
  val () = test_hex ()
  val () = test_session ()
in
  $extfcall (void, "exit", summary ())
end
