(** The cumulo SDK for OCaml: one value of type [t] is one instance, one
    connection to the core (protocol v1, proto/PROTOCOL.md; the calls of
    docs/SDK_GUIDE.md). Use an instance from one thread at a time; [run]
    gives each instance its own thread. Timeouts are in milliseconds; [0]
    or an absent one means the core's default. *)

module Status = Status
module Codec = Codec
module Info = Info

exception Error of Status.t * string
(** Every failure: the status (PROTOCOL 2.3) and the core's message. *)

type t

(** What a handler receives: the REQUEST frame as decoded ([Codec.request]). *)
type request = Codec.request = {
  trans_id : string;  (** 16 bytes *)
  timeout : int;
  priority : int;
  flags : int;
  source : int64;  (** [node_id << 32 | instance_id] of the sender, 0 for the core *)
  name : string;
  pattern : string;
  request_info : string;
  request : string;
  sync : bool;  (** sent with [send_sync] *)
  mcast : bool;  (** a multicast copy *)
}

type handler = t -> request -> string * string
(** Returns [(response_info, response)]; after [forward] the value is
    ignored. An exception becomes a [SERVICE_ERROR] answer naming it. *)

val create :
  ?socket:string -> ?token:string -> ?prefix:string -> ?thread_index:int -> ?window:int -> ?max_frame:int ->
  unit -> t
(** Connects, sends [HELLO], waits for [WELCOME]. [socket] and [token]
    default to [CUMULO_SOCKET] and [CUMULO_TOKEN]; with no token the
    instance is unmanaged and needs [prefix]. [max_frame] caps frames read
    (default: WELCOME's max_frame plus what a REQUEST adds). *)

val subscribe : t -> string -> handler -> unit
(** [SUBSCRIBE] the pattern (relative to the prefix); the handler serves it. *)

val unsubscribe : t -> string -> unit
val subscribe_count : t -> string -> int

val send_async :
  t -> ?request_info:string -> ?timeout:int -> ?priority:int -> ?wait_for_service:bool -> string -> string ->
  string
(** [send_async api name request]: the new request's trans_id. *)

val send_sync :
  t -> ?request_info:string -> ?timeout:int -> ?priority:int -> ?wait_for_service:bool -> string -> string ->
  string * string
(** [(response_info, response)]; raises [Error] with the response's status. *)

val mcast_async :
  t -> ?request_info:string -> ?timeout:int -> ?priority:int -> ?wait_for_service:bool -> string -> string ->
  string list
(** The trans_ids of the copies; collect their answers with [recv_async]. *)

val recv_async : t -> ?trans_id:string -> ?timeout:int -> unit -> string * string * string
(** [(trans_id, response_info, response)] of that send, or of the next one. *)

val forward :
  t -> ?request_info:string -> ?request:string -> ?timeout:int -> ?priority:int -> request -> string -> unit
(** From a handler: passes the request on to a name (fields default to the
    request's own). *)

val poll : ?timeout:int -> t -> bool
(** Serves requests and answers [PING]: [false] once [TERMINATE] arrived
    (after the requests already delivered), [true] when [timeout] passed. *)

val close : t -> unit
(** Writes what is queued, [GOODBYE], closes. *)

val run : ?thread_count:int -> ?window:int -> ?socket:string -> ?prefix:string -> (t -> unit) -> unit
(** A whole service process: [CUMULO_THREAD_COUNT] instances, each in its
    own thread, set up by the function (subscriptions) and polled until
    [TERMINATE] or until the core goes away. *)

val is_terminated : t -> bool
val process_index : t -> int
val process_count : t -> int
val thread_count : t -> int
val thread_index : t -> int
val prefix : t -> string
val timeout_async : t -> int
val timeout_sync : t -> int
val timeout_terminate : t -> int
val priority_default : t -> int
val node_id : t -> int
val instance_id : t -> int
val window : t -> int
val max_frame : t -> int
val keepalive : t -> int

val info_encode : (string * string) list -> string
(** The key/value encoding (PROTOCOL 5); [Invalid_argument] for a NUL. *)

val info_parse : string -> (string * string) list
(** Raises [Error (Malformed, _)] on malformed bytes. *)
