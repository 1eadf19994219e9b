(* {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
** answers "hello from {{name}}", with the request's "value" parameter when
** it has one. Runs CUMULO_THREAD_COUNT instances, one per thread.
*)

#include "share/atspre_staload.hats"

staload "SATS/cumulo.sats"

val text = info_encode ($list{@(string, string)}(@("content-type", "text/plain; charset=utf-8")))

(* Malformed key/value bytes are answered as if there were no value. *)
fun on_get (api: api, req: request, user: ptr): int = let
  var value: bytes
  var found: bool
  val rc = info_find (request_body req, "value", value, found)
in
  if rc = 0 && found then let
    var buf = @[byte][512]()
    val len = $extfcall (int, "snprintf", addr@buf, 512, "hello from {{name}} (value %.*s)",
                         $UNSAFE.cast{int}(value.len), value.data)
    var body: bytes
    val () = body.data := addr@buf
    val () = body.len := $UNSAFE.cast{size_t}(if len < 512 then len else 511) (* truncated *)
  in
    respond (api, req, text, body)
  end
  else respond (api, req, text, bytes_of_string "hello from {{name}}")
end

fun setup (api: api, user: ptr): int = subscribe (api, "{{name}}/get", on_get, user)

implement main0 () = let
  val rc = run (1u, setup, the_null_ptr)
in
  if rc != 0 then $extfcall (void, "exit", 1)
end
