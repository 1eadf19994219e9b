(* Faulty service: the boom handler fails (as in C: it returns an error
** status without answering), ok answers "ok". The trace_* handlers call
** /echo/trace with an empty request_info and answer with the request_info
** the echo got (its response_info), to show the trace context they inherit
** (PROTOCOL.md 5.1); trace_forward forwards, and the echo answers. *)

#include "share/atspre_staload.hats"

staload "SATS/cumulo.sats"

macdef ECHO = "/echo/trace"

fun boom (api: api, req: request, user: ptr): int = status_invalid_argument

fun ok (api: api, req: request, user: ptr): int = respond (api, req, bytes_empty (), bytes_of_string "ok")

(* The echo's response_info as the body. *)
fun echoed (api: api, req: request, rc: int, resp: &response): int =
  if rc != 0 then rc
  else if response_status resp != 0 then response_status resp
  else respond (api, req, bytes_empty (), response_info resp)

(* Collects the echo's answer to tid; timeouts and priorities: the defaults. *)
fun collect (api: api, req: request, tid: trans_id): int = let
  var id: trans_id = tid
  var resp: response
  val rc = recv_async (api, addr@id, ~1, resp)
in
  echoed (api, req, rc, resp)
end

fun trace_sync (api: api, req: request, user: ptr): int = let
  var resp: response
  val rc = send_sync (api, ECHO, bytes_empty (), bytes_empty (), 0u, 300, resp)
in
  echoed (api, req, rc, resp)
end

fun trace_async (api: api, req: request, user: ptr): int = let
  var tid: trans_id
  val rc = send_async (api, ECHO, bytes_empty (), bytes_empty (), 0u, 300, tid)
in
  if rc != 0 then rc else collect (api, req, tid)
end

fun trace_mcast (api: api, req: request, user: ptr): int = let
  var ids: ptr
  var count: size_t
  val rc = mcast_async (api, ECHO, bytes_empty (), bytes_empty (), 0u, 300, ids, count)
in
  if rc != 0 then rc
  else if count = i2sz 0 then status_no_service
  else collect (api, req, trans_id_at (ids, i2sz 0))
end

fun trace_forward (api: api, req: request, user: ptr): int =
  forward (api, req, ECHO, bytes_empty (), request_body req, 0u, 300)

(* Subscribes pattern unless an earlier subscribe failed (rc). *)
fun then_subscribe (rc: int, api: api, pattern: string, h: handler, user: ptr): int =
  if rc != 0 then rc else subscribe (api, pattern, h, user)

fun setup (api: api, user: ptr): int = let
  val rc = subscribe (api, "boom", boom, user)
  val rc = then_subscribe (rc, api, "ok", ok, user)
  val rc = then_subscribe (rc, api, "trace_sync", trace_sync, user)
  val rc = then_subscribe (rc, api, "trace_async", trace_async, user)
  val rc = then_subscribe (rc, api, "trace_mcast", trace_mcast, user)
in
  then_subscribe (rc, api, "trace_forward", trace_forward, user)
end

implement main0 () = let
  val rc = run (1u, setup, the_null_ptr)
in
  if rc != 0 then begin prerrln! ("faulty: ", status_name rc); $extfcall (void, "exit", 1) end
end
