(* Faulty service: the boom handler fails (as in C: it returns an error
** status without answering), ok answers "ok". *)

#include "share/atspre_staload.hats"

staload "SATS/cumulo.sats"

fun boom (api: api, req: request, user: ptr): int = status_invalid_argument

fun ok (api: api, req: request, user: ptr): int = respond (api, req, bytes_empty (), bytes_of_string "ok")

fun setup (api: api, user: ptr): int = let
  val rc = subscribe (api, "boom", boom, user)
in
  if rc != 0 then rc else subscribe (api, "ok", ok, user)
end

implement main0 () = let
  val rc = run (1u, setup, the_null_ptr)
in
  if rc != 0 then begin prerrln! ("faulty: ", status_name rc); $extfcall (void, "exit", 1) end
end
