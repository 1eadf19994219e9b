(* The http_req example service (docs/SDK_GUIDE.md): subscribes ats2.xml/get
** and answers <http_test><value>N</value></http_test> for an integer
** "value" in the key/value request body, or an error element otherwise.
** Runs CUMULO_THREAD_COUNT instances, one per thread. HTTP_REQ_WINDOW:
** requests the core may deliver to each instance at once (default 1;
** anything but a positive integer stops the process).
*)

#include "share/atspre_staload.hats"

%{^
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
/* HTTP_REQ_WINDOW: unset or empty is 1; anything but a positive integer
 * (decimal digits, at most 2^32-1) stops the process. */
static unsigned int http_req_window(void) {
  const char *w = getenv("HTTP_REQ_WINDOW");
  if (!w || !*w) return 1;
  uint64_t n = 0;
  const char *p = w;
  for (; *p >= '0' && *p <= '9' && n <= UINT32_MAX; p++) n = n * 10 + (uint64_t)(*p - '0');
  if (*p || n < 1 || n > UINT32_MAX) {
    fprintf(stderr, "http_req: HTTP_REQ_WINDOW='%s' is not a positive integer\n", w);
    exit(2);
  }
  return (unsigned int)n;
}
%}

staload "SATS/cumulo.sats"

val content_type = info_encode ($list{@(string, string)}(@("content-type", "text/xml; charset=utf-8")))
val no_value = bytes_of_string "<http_test><error>no value specified</error></http_test>"

(* An optional sign, then one or more ASCII digits, within 64 bits. *)
fun parse_int64 (text: bytes, out: &llint >> _): bool = let
  val len = bytes_length text
  val first = bytes_get (text, i2sz 0)
  val negative = first = char2int0 '-'
  val start = if negative || first = char2int0 '+' then i2sz 1 else i2sz 0
  val limit = if negative then 9223372036854775808ULL else 9223372036854775807ULL
  fun digits (i: size_t, magnitude: &ullint >> _): bool =
    if i >= len then true
    else let
      val c = bytes_get (text, i)
    in
      if c < char2int0 '0' || c > char2int0 '9' then false
      else let
        val digit = $UNSAFE.cast{ullint}(c - char2int0 '0')
      in
        if magnitude > (limit - digit) / 10ULL then false
        else (magnitude := magnitude * 10ULL + digit; digits (succ i, magnitude))
      end
    end
  var magnitude: ullint = 0ULL
  val ok = start < len && digits (start, magnitude)
in
  (* -2^63 has no positive counterpart: negate in unsigned arithmetic *)
  out := $UNSAFE.cast{llint}(if negative then 0ULL - magnitude else magnitude);
  ok
end

fun http_req (api: api, req: request, user: ptr): int = let
  var value: bytes
  var found: bool
  var n: llint = 0LL
  val rc = info_find (request_body req, "value", value, found)
in
  if rc = 0 && found && parse_int64 (value, n) then let
    var buf = @[byte][96]()
    val len = $extfcall (int, "snprintf", addr@buf, 96, "<http_test><value>%lld</value></http_test>", n)
    var body: bytes
    val () = body.data := addr@buf
    val () = body.len := $UNSAFE.cast{size_t}(len)
  in
    respond (api, req, content_type, body)
  end
  else respond (api, req, content_type, no_value)
end

fun setup (api: api, user: ptr): int = subscribe (api, "ats2.xml/get", http_req, user)

implement main0 () = let
  val rc = run ($extfcall (uint, "http_req_window"), setup, the_null_ptr)
in
  if rc != 0 then $extfcall (void, "exit", 1)
end
