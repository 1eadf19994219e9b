(* The parts of the ATS2 SDK written in ATS (SATS/cumulo.sats): what
** needs ATS lists or tests of views; the rest maps straight onto sdk/c. *)

#include "share/atspre_staload.hats"

#define ATS_DYNLOADFLAG 0

staload "SATS/cumulo.sats"

implement api_is_null (api) = $UNSAFE.cast{ptr}(api) = the_null_ptr

implement bytes_length (b) = b.len

implement bytes_valid (b) = b.len != $UNSAFE.cast{size_t}(~1)

extern fun kvbuf_new (): ptr = "mac#atscumulo_kvbuf_new"
extern fun kvbuf_add (buf: ptr, key: string, value: string): void = "mac#atscumulo_kvbuf_add"
extern fun kvbuf_finish (buf: ptr): bytes = "mac#atscumulo_kvbuf_finish"
extern fun info_count (info: bytes, count: &size_t? >> size_t): int = "mac#atscumulo_info_count"
extern fun info_pair (info: bytes, i: size_t, key: &bytes? >> bytes, value: &bytes? >> bytes): void = "mac#atscumulo_info_pair"

implement info_encode (pairs) = let
  val buf = kvbuf_new ()
  fun add (xs: List0 @(string, string)): void =
    case+ xs of
    | list_nil () => ()
    | list_cons (kv, rest) => (kvbuf_add (buf, kv.0, kv.1); add rest)
in
  add pairs; kvbuf_finish buf
end

implement info_parse (info) = let
  var count: size_t
  val rc = info_count (info, count)
  fun collect (i: size_t, acc: List0 info_pair): List0 info_pair =
    if i = i2sz 0 then acc
    else let
      var key: bytes
      var value: bytes
      val () = info_pair (info, pred i, key, value)
    in
      collect (pred i, list_cons (@(key, value), acc))
    end
in
  if rc = 0 then Some (collect (count, list_nil ())) else None ()
end
