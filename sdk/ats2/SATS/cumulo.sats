(* cumulo ATS2 SDK: the calls of docs/SDK_GUIDE.md over the cumulo C SDK
** (sdk/c), as the C++ SDK is. Load it with a namespace:
**
**   staload CUMULO = "SATS/cumulo.sats"
**
** and call $CUMULO.send_sync (...), $CUMULO.poll (...). Calls return a
** status: 0 (status_ok) or a protocol status (PROTOCOL.md 2.3), or a
** negative SDK error (the status_e_ ones) as the C SDK does.
*)

%{#
#include "CATS/cumulo.cats"
%}

#define ATS_PACKNAME "cumulo"

(* ****** ****** types *)

(* One instance (a connection); the_null_ptr-like when a connect failed: test with api_is_null. *)
typedef api = $extype "atscumulo_api"
(* A request delivered to a handler: valid until the handler returns. *)
typedef request = $extype "atscumulo_request"
(* A view of bytes (data, len): request bodies, key/value info. *)
typedef bytes = $extype_struct "cumulo_bytes" of { data = ptr, len = size_t }
typedef trans_id = $extype "cumulo_trans_id"
(* A RESPONSE: its views are valid until the next call on the instance. *)
typedef response = $extype "cumulo_response"

(* A handler answers with respond / respond_error / forward and returns
** status_ok; a non-zero return without an answer becomes SERVICE_ERROR. *)
typedef handler = (api, request, ptr) -<fun1> int
(* The subscriptions of each instance of run; a non-zero return stops it. *)
typedef setup = (api, ptr) -<fun1> int

(* ****** ****** statuses *)

macdef status_ok = 0
macdef status_timeout = 1
macdef status_no_service = 2
macdef status_service_error = 7
macdef status_too_large = 8
macdef status_invalid_argument = 9
macdef status_unavailable = 13
macdef status_e_closed = ~2
macdef status_e_terminated = ~5

fun status_name (status: int): string = "mac#atscumulo_status_name"

(* ****** ****** connecting *)

(* A process the core started: CUMULO_SOCKET, CUMULO_TOKEN from the environment. *)
fun connect (thread_index: uint, window: uint): api = "mac#atscumulo_connect"
fun connect_unmanaged (socket: string, service_prefix: string): api = "mac#atscumulo_connect_unmanaged"
(* Over a connected stream socket (tests: one end of a socketpair). *)
fun connect_fd (fd: int, service_prefix: string): api = "mac#atscumulo_connect_fd"
fun api_is_null (api: api): bool
(* Why the last connect of this thread failed. *)
fun connect_error (): string = "mac#atscumulo_connect_error"
(* Writes what is queued, says GOODBYE, closes and frees the instance. *)
fun close (api: api): void = "mac#cumulo_destroy"
fun error_message (api: api): string = "mac#atscumulo_error_message"

(* Runs a process: CUMULO_THREAD_COUNT instances, one per thread, each calling
** setup and then polling until TERMINATE. *)
fun run (window: uint, setup: setup, user_data: ptr): int = "mac#atscumulo_run_setup"

(* ****** ****** accessors (WELCOME) *)

fun process_index (api: api): uint = "mac#cumulo_process_index"
fun process_count (api: api): uint = "mac#cumulo_process_count"
fun thread_count (api: api): uint = "mac#cumulo_thread_count"
fun thread_index (api: api): uint = "mac#cumulo_thread_index"
(* the prefix of the guide: prefix is a keyword of ATS *)
fun service_prefix (api: api): string = "mac#atscumulo_prefix"
fun timeout_async (api: api): uint = "mac#cumulo_timeout_async"
fun timeout_sync (api: api): uint = "mac#cumulo_timeout_sync"
fun timeout_terminate (api: api): uint = "mac#cumulo_timeout_terminate"
fun priority_default (api: api): int = "mac#cumulo_priority_default"
fun node_id (api: api): uint = "mac#cumulo_node_id"
fun instance_id (api: api): uint = "mac#cumulo_instance_id"
fun window (api: api): uint = "mac#cumulo_window"
fun max_frame (api: api): uint = "mac#cumulo_max_frame"
fun keepalive (api: api): uint = "mac#cumulo_keepalive"

(* ****** ****** subscriptions and serving *)

fun subscribe (api: api, pattern: string, handler: handler, user_data: ptr): int = "mac#atscumulo_subscribe"
fun unsubscribe (api: api, pattern: string): int = "mac#cumulo_unsubscribe"
fun subscribe_count (api: api, pattern: string, count: &uint? >> uint): int = "mac#atscumulo_subscribe_count"
(* The event loop for up to timeout_ms (~1: until TERMINATE): status_ok when
** the time is up, status_e_terminated once TERMINATE arrived, or an error. *)
fun poll (api: api, timeout_ms: int): int = "mac#cumulo_poll"

(* RETURN from a handler: OK with response_info and response, or a status and a message. *)
fun respond (api: api, req: request, response_info: bytes, response: bytes): int = "mac#atscumulo_return"
fun respond_error (api: api, req: request, status: int, message: string): int = "mac#cumulo_return_error"
(* FORWARD the request; timeout 0 keeps what is left, a priority outside
** -128..127 keeps the request's. The handler must not also respond. *)
fun forward (api: api, req: request, name: string, request_info: bytes, request: bytes,
             timeout: uint, priority: int): int = "mac#atscumulo_forward"

fun request_name (req: request): bytes = "mac#atscumulo_request_name"
fun request_pattern (req: request): bytes = "mac#atscumulo_request_pattern"
fun request_info (req: request): bytes = "mac#atscumulo_request_info"
fun request_body (req: request): bytes = "mac#atscumulo_request_body"
fun request_timeout (req: request): uint = "mac#atscumulo_request_timeout"
fun request_priority (req: request): int = "mac#atscumulo_request_priority"
fun request_source (req: request): ullint = "mac#atscumulo_request_source"
fun request_sync (req: request): bool = "mac#atscumulo_request_sync"
fun request_trans_id (req: request): trans_id = "mac#atscumulo_request_trans_id"

(* ****** ****** sending; timeout 0 and a priority outside -128..127 mean the defaults *)

fun send_async (api: api, name: string, request: bytes, request_info: bytes, timeout: uint, priority: int,
                trans_id: &trans_id? >> trans_id): int = "mac#atscumulo_send_async"
(* Waits for the answer: the response's status (status_ok: an answer in resp). *)
fun send_sync (api: api, name: string, request: bytes, request_info: bytes, timeout: uint, priority: int,
               resp: &response? >> response): int = "mac#atscumulo_send_sync"
(* The copies' trans_ids: count of them at ids (valid until the next call). *)
fun mcast_async (api: api, name: string, request: bytes, request_info: bytes, timeout: uint, priority: int,
                 ids: &ptr? >> ptr, count: &size_t? >> size_t): int = "mac#atscumulo_mcast_async"
(* The RESPONSE of the trans_id at tid (the_null_ptr: the oldest kept one),
** waiting up to timeout_ms (~1: no limit); status_ok when one was collected,
** whatever its own status. *)
fun recv_async (api: api, tid: ptr, timeout_ms: int, resp: &response? >> response): int = "mac#atscumulo_recv_async"

fun response_status (resp: &response): int = "mac#atscumulo_response_status"
fun response_info (resp: &response): bytes = "mac#atscumulo_response_info"
fun response_body (resp: &response): bytes = "mac#atscumulo_response_body"
fun response_trans_id (resp: &response): trans_id = "mac#atscumulo_response_trans_id"

fun trans_id_at (ids: ptr, i: size_t): trans_id = "mac#atscumulo_trans_id_at"
fun trans_id_hex (tid: trans_id): string = "mac#atscumulo_trans_id_hex"
fun trans_id_equal (a: trans_id, b: trans_id): bool = "mac#atscumulo_trans_id_equal"

(* ****** ****** bytes *)

fun bytes_of_string (s: string): bytes = "mac#atscumulo_bytes_of_string"
fun bytes_empty (): bytes = "mac#atscumulo_bytes_empty"
(* From hex digits; len is (size_t)-1 for bad hex: test with bytes_valid. *)
fun bytes_of_hex (hex: string): bytes = "mac#atscumulo_bytes_of_hex"
(* Gives back the memory of bytes the SDK allocated: those of bytes_of_hex
** and info_encode (once each, and not used after). Never a view of a
** string (bytes_of_string) or of a request's fields. *)
fun bytes_free (b: bytes): void = "mac#atscumulo_bytes_free"
fun bytes_valid (b: bytes): bool
fun bytes_length (b: bytes): size_t
fun bytes_get (b: bytes, i: size_t): int = "mac#atscumulo_bytes_get"
fun bytes_equal (a: bytes, b: bytes): bool = "mac#atscumulo_bytes_equal"
fun bytes_to_string (b: bytes): string = "mac#atscumulo_bytes_to_string"
fun bytes_hex (b: bytes): string = "mac#atscumulo_bytes_hex"
fun bytes_print (b: bytes): void = "mac#atscumulo_bytes_print"
fun bytes_print_hex (b: bytes): void = "mac#atscumulo_bytes_print_hex"

(* ****** ****** key/value (PROTOCOL.md 5) *)

typedef info_pair = @(bytes, bytes)
(* Keys and values without NUL bytes; allocated: bytes_free it when done. *)
fun info_encode (pairs: List0 @(string, string)): bytes
(* Every pair, or None for malformed bytes. *)
fun info_parse (info: bytes): Option (List0 info_pair)
(* The first value of key: status_ok with found set, or MALFORMED. *)
fun info_find (info: bytes, key: string, value: &bytes? >> bytes, found: &bool? >> bool): int = "mac#atscumulo_info_find"
