(* Status codes of the protocol (proto/PROTOCOL.md 2.3). *)

type t =
  | Ok
  | Timeout
  | No_service
  | Queue_full
  | Crashed
  | Malformed
  | Shutting_down
  | Service_error
  | Too_large
  | Invalid_argument
  | Unsupported_version
  | Unauthorized
  | Protocol
  | Unavailable
  | Unknown of int  (** a code this SDK does not know: an error all the same *)

let known =
  [| Ok; Timeout; No_service; Queue_full; Crashed; Malformed; Shutting_down; Service_error; Too_large;
     Invalid_argument; Unsupported_version; Unauthorized; Protocol; Unavailable |]

let of_code code = if code >= 0 && code < Array.length known then known.(code) else Unknown code

let to_code = function
  | Unknown code -> code
  | status ->
    let rec find i = if known.(i) = status then i else find (i + 1) in
    find 0

let to_string = function
  | Ok -> "OK"
  | Timeout -> "TIMEOUT"
  | No_service -> "NO_SERVICE"
  | Queue_full -> "QUEUE_FULL"
  | Crashed -> "CRASHED"
  | Malformed -> "MALFORMED"
  | Shutting_down -> "SHUTTING_DOWN"
  | Service_error -> "SERVICE_ERROR"
  | Too_large -> "TOO_LARGE"
  | Invalid_argument -> "INVALID_ARGUMENT"
  | Unsupported_version -> "UNSUPPORTED_VERSION"
  | Unauthorized -> "UNAUTHORIZED"
  | Protocol -> "PROTOCOL"
  | Unavailable -> "UNAVAILABLE"
  | Unknown code -> string_of_int code

(* Every failure of the SDK: the status and the core's (or the SDK's) message. *)
exception Error of t * string

let () =
  Printexc.register_printer (function
    | Error (status, message) -> Some (Printf.sprintf "Cumulo.Error(%s, %S)" (to_string status) message)
    | _ -> None)

let fail status fmt = Printf.ksprintf (fun message -> raise (Error (status, message))) fmt
