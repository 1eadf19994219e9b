(* Unmanaged client: client SOCKET NAME HEX_BODY [sync|async]
**
** Prints the hex response_info, a newline and the response body; on an
** error status prints its name, a newline and the message, and exits 3.
*)

#include "share/atspre_staload.hats"

staload "SATS/cumulo.sats"

fun finish (api: api, rc: int, resp: &response): int =
  if rc = 0 && response_status resp = 0 then begin
    bytes_print_hex (response_info resp); print_newline (); bytes_print (response_body resp); 0
  end
  else if rc >= 0 then let
    val status = if rc > 0 then rc else response_status resp
  in
    print_string (status_name status); print_newline (); bytes_print (response_body resp); 3
  end
  else begin
    prerrln! (status_name rc, ": ", error_message api); 1
  end

(* send_async, then recv_async of its trans_id; resp is set either way. *)
fun send_then_recv (api: api, name: string, body: bytes, resp: &response? >> response): int = let
  var tid: trans_id
  val sent = send_async (api, name, body, bytes_empty (), 0u, 1000, tid)
  val got = recv_async (api, if sent = 0 then addr@tid else the_null_ptr, if sent = 0 then ~1 else 0, resp)
in
  if sent = 0 then got else sent
end

implement main0 (argc, argv) =
  if argc < 4 then begin
    prerrln! "usage: client SOCKET NAME HEX_BODY [sync|async]"; $extfcall (void, "exit", 2)
  end
  else let
    val body = bytes_of_hex argv[3]
    val async = argc > 4 && argv[4] = "async"
    val api = connect_unmanaged (argv[1], "/client/ats2/")
  in
    if api_is_null api then begin
      prerrln! ("connect: ", connect_error ()); $extfcall (void, "exit", 1)
    end
    else let
      var resp: response
      val rc =
        if async then send_then_recv (api, argv[2], body, resp)
        else send_sync (api, argv[2], body, bytes_empty (), 0u, 1000, resp)
      val code = finish (api, rc, resp)
    in
      fileref_flush stdout_ref;
      close api;
      $extfcall (void, "exit", code)
    end
  end
