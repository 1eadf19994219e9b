(* The cumulo API: one instance, one connection to the core (see cumulo.mli). *)

module Status = Status
module Codec = Codec
module Info = Info

exception Error = Status.Error

let fail = Status.fail

type request = Codec.request = {
  trans_id : string;
  timeout : int;
  priority : int;
  flags : int;
  source : int64;
  name : string;
  pattern : string;
  request_info : string;
  request : string;
  sync : bool;
  mcast : bool;
}

type t = {
  fd : Unix.file_descr;
  mutable buf : Bytes.t;  (* bytes read, not yet decoded: [start, stop) *)
  mutable start : int;
  mutable stop : int;
  out : Buffer.t;  (* frames queued for the next write (RETURNs of a batch) *)
  mutable welcome : Codec.welcome option;
  index : int;
  read_limit : int option;
  mutable frame_limit : int;  (* WELCOME's max_frame: the largest frame we send *)
  handlers : (string, handler) Hashtbl.t;
  queue : request Queue.t;  (* REQUESTs waiting for poll *)
  responses : (string, Codec.answer) Hashtbl.t;  (* RESPONSEs not yet collected *)
  mutable order : string list;  (* their trans_ids, oldest first *)
  abandoned : (string, unit) Hashtbl.t;  (* send_syncs given up: their answers are dropped *)
  forwarded : (string, unit) Hashtbl.t;
  mutable req_id : int;
  mutable last_ns : int64;
  mutable terminated : bool;
  mutable slow : bool;
  mutable closed : bool;
  mutable trace : string;  (* the running handler's trace context, see [trace_of] *)
}

and handler = t -> request -> string * string

let request_overhead = 8 + 2 + 0xffff (* what a REQUEST adds to its SEND: source, pattern *)
let grace_ms = 1000 (* how long past a request's timeout to wait for the core's own answer *)
let handshake_timeout_ms = 30_000
let slow_handler_s = 0.001
let read_size = 65536

(* ------------------------------------------------------------ the stream *)

let now () = Unix.gettimeofday ()
let deadline ms grace = Some (now () +. (float_of_int (ms + grace) /. 1000.))

let close_fd t =
  if not t.closed then begin
    t.closed <- true;
    try Unix.close t.fd with Unix.Unix_error _ -> ()
  end

let rec write_all t s pos len =
  if len > 0 then
    match Unix.write_substring t.fd s pos len with
    | n -> write_all t s (pos + n) (len - n)
    | exception Unix.Unix_error (Unix.EINTR, _, _) -> write_all t s pos len
    | exception Unix.Unix_error (e, _, _) ->
      close_fd t;
      fail Status.Shutting_down "write: %s" (Unix.error_message e)

let flush t =
  if Buffer.length t.out > 0 then begin
    let s = Buffer.contents t.out in
    Buffer.clear t.out;
    if t.closed then fail Status.Shutting_down "the connection is closed";
    write_all t s 0 (String.length s)
  end

(* Queues a frame behind the RETURNs; refuses one over max_frame. *)
let enqueue t message =
  let before = Buffer.length t.out in
  match Codec.add t.out message with
  | length when length > t.frame_limit ->
    Buffer.truncate t.out before;
    fail Status.Too_large "a %s frame of %d bytes is over max_frame %d" (Codec.type_name message) length t.frame_limit
  | _ -> ()
  | exception Codec.Out_of_range field ->
    Buffer.truncate t.out before;
    fail Status.Invalid_argument "%s: field %s is out of range or not UTF-8" (Codec.type_name message) field

let write t message = enqueue t message; flush t

let read_limit t = match t.read_limit with Some l -> l | None -> t.frame_limit + request_overhead

(* Waits until the socket is readable or the deadline passed (false). *)
let rec readable t = function
  | None -> true
  | Some d ->
    let left = d -. now () in
    if left <= 0. then false
    else
      match Unix.select [ t.fd ] [] [] left with
      | [], _, _ -> readable t (Some d)
      | _ -> true
      | exception Unix.Unix_error (Unix.EINTR, _, _) -> readable t (Some d)

(* Reads what the socket holds into the buffer (making room for a frame of
   [need] bytes); false when the deadline passed first. *)
let fill t need deadline =
  let held = t.stop - t.start in
  if t.start > 0 then begin
    Bytes.blit t.buf t.start t.buf 0 held;
    t.start <- 0;
    t.stop <- held
  end;
  let want = max need (held + read_size) in
  if Bytes.length t.buf < want then begin
    let bigger = Bytes.create (max want (2 * Bytes.length t.buf)) in
    Bytes.blit t.buf 0 bigger 0 held;
    t.buf <- bigger
  end;
  flush t;
  if not (readable t deadline) then false
  else
    let rec read () =
      match Unix.read t.fd t.buf t.stop (Bytes.length t.buf - t.stop) with
      | 0 ->
        close_fd t;
        fail Status.Shutting_down "the core closed the connection"
      | n -> t.stop <- t.stop + n; true
      | exception Unix.Unix_error (Unix.EINTR, _, _) -> read ()
      | exception Unix.Unix_error (e, _, _) ->
        close_fd t;
        fail Status.Shutting_down "read: %s" (Unix.error_message e)
    in
    if t.closed then fail Status.Shutting_down "the connection is closed";
    read ()

(* The next frame, or None when the deadline passed. The queued RETURNs go
   out before the instance waits for input. After a bad frame the stream
   cannot be resynchronised: the connection is closed. *)
let rec next_frame t deadline =
  let held = t.stop - t.start in
  let s = Bytes.unsafe_to_string t.buf in
  if held >= 4 then begin
    let length = Codec.length_at s t.start in
    if length > read_limit t then begin
      close_fd t;
      fail Status.Too_large "a frame of %d bytes from the core is over the limit of %d" length (read_limit t)
    end;
    if held >= 4 + length then begin
      let pos = t.start + 4 in
      t.start <- pos + length;
      match Codec.decode_at s pos (pos + length) with
      | message -> Some message
      | exception (Error _ as e) -> close_fd t; raise e
    end
    else if fill t (4 + length) deadline then next_frame t deadline
    else None
  end
  else if fill t 4 deadline then next_frame t deadline
  else None

(* ------------------------------------------------------------ connecting *)

let welcome t =
  match t.welcome with Some w -> w | None -> fail Status.Protocol "no WELCOME from the core yet"

let env name default = match Sys.getenv_opt name with Some v when v <> "" -> v | _ -> default

let connect_socket address =
  let prefix = "tcp://" in
  let n = String.length prefix in
  let domain, addr =
    if String.length address > n && String.sub address 0 n = prefix then begin
      let hostport = String.sub address n (String.length address - n) in
      let colon = String.rindex hostport ':' in
      let host = String.sub hostport 0 colon in
      let port = int_of_string (String.sub hostport (colon + 1) (String.length hostport - colon - 1)) in
      let ip = try Unix.inet_addr_of_string host with Failure _ -> (Unix.gethostbyname host).Unix.h_addr_list.(0) in
      (Unix.PF_INET, Unix.ADDR_INET (ip, port))
    end
    else (Unix.PF_UNIX, Unix.ADDR_UNIX address)
  in
  let fd = Unix.socket ~cloexec:true domain Unix.SOCK_STREAM 0 in
  (try Unix.connect fd addr
   with Unix.Unix_error (e, _, _) ->
     Unix.close fd;
     fail Status.Shutting_down "cannot connect to %s: %s" address (Unix.error_message e));
  if domain = Unix.PF_INET then Unix.setsockopt fd Unix.TCP_NODELAY true;
  fd

let create ?socket ?token ?prefix ?(thread_index = 0) ?(window = 1) ?max_frame () =
  (* a write to a closed socket is an error to report, not a signal that kills *)
  Sys.set_signal Sys.sigpipe Sys.Signal_ignore;
  let token = match token with Some t -> t | None -> env "CUMULO_TOKEN" "" in
  let hello_prefix = if token = "" then Option.value prefix ~default:"" else "" in
  if token = "" && (hello_prefix = "" || hello_prefix.[0] <> '/') then
    fail Status.Invalid_argument "an unmanaged instance needs a prefix starting with '/'";
  let address = match socket with Some s -> s | None -> env "CUMULO_SOCKET" "" in
  if address = "" then fail Status.Invalid_argument "no socket given and CUMULO_SOCKET is not set";
  let t = {
    fd = connect_socket address; buf = Bytes.create read_size; start = 0; stop = 0; out = Buffer.create 4096;
    welcome = None; index = thread_index; read_limit = max_frame; frame_limit = 8 * 1024 * 1024;
    handlers = Hashtbl.create 8; queue = Queue.create (); responses = Hashtbl.create 8; order = [];
    abandoned = Hashtbl.create 8; forwarded = Hashtbl.create 8; req_id = 0; last_ns = 0L; terminated = false;
    slow = false; closed = false; trace = "";
  } in
  (try
     write t (Codec.Hello { version = 1; window; thread_index; token; prefix = hello_prefix });
     match next_frame t (deadline handshake_timeout_ms 0) with
     | Some (Codec.Welcome w) -> t.welcome <- Some w; t.frame_limit <- w.max_frame
     | Some (Codec.Error e) -> raise (Error (Status.of_code e.status, e.message))
     | Some m -> fail Status.Protocol "expected WELCOME, got %s" (Codec.type_name m)
     | None -> fail Status.Timeout "no WELCOME from the core"
   with e -> close_fd t; raise e);
  t

let close t =
  if not t.closed then begin
    (try write t Codec.Goodbye with Error _ -> ());
    close_fd t
  end

(* ------------------------------------------------------------ background *)

let keep_response t (a : Codec.answer) =
  if Hashtbl.mem t.abandoned a.trans_id then Hashtbl.remove t.abandoned a.trans_id
  else begin
    if not (Hashtbl.mem t.responses a.trans_id) then t.order <- t.order @ [ a.trans_id ];
    Hashtbl.replace t.responses a.trans_id a
  end

(* A frame nobody is waiting for. *)
let background t = function
  | Codec.Ping nonce -> write t (Codec.Pong nonce)
  | Codec.Request r -> Queue.push r t.queue
  | Codec.Response a -> keep_response t a
  | Codec.Terminate _ -> t.terminated <- true
  | Codec.Error e -> close_fd t; raise (Error (Status.of_code e.status, e.message))
  | Codec.Reply _ | Codec.Mcast_sent _ | Codec.Pong _ -> () (* answers nobody waits for any more *)
  | m -> fail Status.Protocol "unexpected %s from the core" (Codec.type_name m)

(* Reads frames until [wanted] returns one (Some) or the deadline passes
   (None); every other frame is handled in the background. *)
let rec await t deadline wanted =
  match next_frame t deadline with
  | None -> None
  | Some (Codec.Response a) when Hashtbl.mem t.abandoned a.trans_id ->
    Hashtbl.remove t.abandoned a.trans_id;
    await t deadline wanted
  | Some m -> (
    match wanted m with
    | Some _ as found -> found
    | None -> background t m; await t deadline wanted)

let answer (a : Codec.answer) =
  if a.status <> 0 then raise (Error (Status.of_code a.status, a.response));
  (a.response_info, a.response)

(* ------------------------------------------------------------ subscriptions *)

let control t make pattern =
  t.req_id <- (t.req_id + 1) land 0xffff_ffff;
  let req_id = t.req_id in
  write t (make req_id pattern);
  let wanted = function Codec.Reply r when r.req_id = req_id -> Some (r.status, r.value, r.message) | _ -> None in
  match await t None wanted with
  | Some (0, value, _) -> value
  | Some (status, _, message) -> raise (Error (Status.of_code status, message))
  | None -> assert false (* no deadline *)

let prefix t = (welcome t).prefix

let subscribe t pattern handler =
  ignore (control t (fun req_id pattern -> Codec.Subscribe { req_id; pattern }) pattern);
  Hashtbl.replace t.handlers (prefix t ^ pattern) handler

let subscribe_count t pattern = control t (fun req_id pattern -> Codec.Subscribe_count { req_id; pattern }) pattern

let unsubscribe t pattern =
  ignore (control t (fun req_id pattern -> Codec.Unsubscribe { req_id; pattern }) pattern);
  if subscribe_count t pattern = 0 then Hashtbl.remove t.handlers (prefix t ^ pattern)

(* ------------------------------------------------------------ sending *)

(* Trace context (proto/PROTOCOL.md 5.1): while a handler runs for a request
   R, [t.trace] holds R's traceparent and tracestate pairs, encoded ("" when
   R has no traceparent, and outside handlers); [with_trace] appends them to
   the handler's sends and forwards that give no traceparent. Kept in the
   instance: an instance is used from one thread at a time and runs its
   handlers one after another inside [poll] (each [run] thread has its own
   instance), so it never holds two handlers' contexts. *)
let trace_of request_info =
  if request_info = "" then ""
  else
    match Info.parse request_info with
    | exception Error _ -> ""
    | pairs -> (
      match List.assoc_opt "traceparent" pairs with
      | None -> ""
      | Some parent ->
        let state = match List.assoc_opt "tracestate" pairs with Some s -> [ ("tracestate", s) ] | None -> [] in
        Info.encode (("traceparent", parent) :: state))

let with_trace t request_info =
  if t.trace = "" then request_info
  else
    match Info.parse request_info with
    | pairs when not (List.mem_assoc "traceparent" pairs) -> request_info ^ t.trace
    | _ -> request_info
    | exception Error _ -> request_info (* malformed: sent as it is, the core refuses it *)

(* PROTOCOL 2.2: ns since the epoch (strictly increasing), node_id, instance_id. *)
let new_trans_id t =
  let w = welcome t in
  let ns = Int64.of_float (now () *. 1e9) in
  let ns = if Int64.compare ns t.last_ns <= 0 then Int64.succ t.last_ns else ns in
  t.last_ns <- ns;
  let b = Bytes.create 16 in
  Bytes.set_int64_be b 0 ns;
  Bytes.set_int32_be b 8 (Int32.of_int w.node_id);
  Bytes.set_int32_be b 12 (Int32.of_int w.instance_id);
  Bytes.unsafe_to_string b

let priority_default t = (welcome t).priority_default
let timeout_async t = (welcome t).timeout_async
let timeout_sync t = (welcome t).timeout_sync

let send_request t make ?(request_info = "") ?(timeout = 0) ?priority ?(wait_for_service = false) name request =
  let trans_id = new_trans_id t in
  let priority = Option.value priority ~default:(priority_default t) in
  let flags = if wait_for_service then 1 else 0 in
  write t (make { Codec.trans_id; timeout; priority; flags; name; request_info = with_trace t request_info; request });
  trans_id

let or_default timeout default = if timeout = 0 then default else timeout

let send_async t ?request_info ?timeout ?priority ?wait_for_service name request =
  send_request t (fun s -> Codec.Send_async s) ?request_info ?timeout ?priority ?wait_for_service name request

let send_sync t ?request_info ?(timeout = 0) ?priority ?wait_for_service name request =
  let trans_id =
    send_request t (fun s -> Codec.Send_sync s) ?request_info ~timeout ?priority ?wait_for_service name request
  in
  let wanted = function Codec.Response a when a.trans_id = trans_id -> Some a | _ -> None in
  match await t (deadline (or_default timeout (timeout_sync t)) grace_ms) wanted with
  | Some a -> answer a
  | None ->
    Hashtbl.replace t.abandoned trans_id ();
    fail Status.Timeout "no response to %s in time" name

let mcast_async t ?request_info ?(timeout = 0) ?priority ?wait_for_service name request =
  let trans_id =
    send_request t (fun s -> Codec.Mcast_async s) ?request_info ~timeout ?priority ?wait_for_service name request
  in
  let wanted = function Codec.Mcast_sent m when m.trans_id = trans_id -> Some m.trans_ids | _ -> None in
  match await t (deadline (or_default timeout (timeout_async t)) grace_ms) wanted with
  | Some trans_ids -> trans_ids
  | None -> fail Status.Timeout "no MCAST_SENT for %s in time" name

let take_response t wanted =
  let key = match (wanted, t.order) with None, first :: _ -> Some first | _ -> wanted in
  match key with
  | Some k when Hashtbl.mem t.responses k ->
    let a = Hashtbl.find t.responses k in
    Hashtbl.remove t.responses k;
    t.order <- List.filter (fun x -> x <> k) t.order;
    Some a
  | _ -> None

let recv_async t ?trans_id ?(timeout = 0) () =
  let found =
    match take_response t trans_id with
    | Some _ as a -> a
    | None ->
      let wanted = function
        | Codec.Response a when trans_id = None || trans_id = Some a.trans_id -> Some a
        | _ -> None
      in
      await t (deadline (or_default timeout (timeout_async t)) grace_ms) wanted
  in
  match found with
  | Some a ->
    let info, response = answer a in
    (a.trans_id, info, response)
  | None -> fail Status.Timeout "no response received in time"

let forward t ?request_info ?request ?timeout ?priority (r : request) name =
  write t
    (Codec.Forward
       { trans_id = r.trans_id; timeout = Option.value timeout ~default:r.timeout;
         priority = Option.value priority ~default:r.priority; flags = 0; name;
         request_info = with_trace t (Option.value request_info ~default:r.request_info);
         request = Option.value request ~default:r.request });
  Hashtbl.replace t.forwarded r.trans_id ()

(* ------------------------------------------------------------ serving *)

let queue_return t trans_id status response_info response =
  try enqueue t (Codec.Return { trans_id; status; response_info; response })
  with Error (Status.Too_large, message) ->
    enqueue t (Codec.Return { trans_id; status = Status.to_code Status.Too_large; response_info = ""; response = message })

let handle t (r : request) =
  let status, info, response =
    match Hashtbl.find_opt t.handlers r.pattern with
    | None -> (Status.to_code Status.No_service, "", "no handler for " ^ r.pattern)
    | Some handler -> (
      t.trace <- trace_of r.request_info;
      match Fun.protect ~finally:(fun () -> t.trace <- "") (fun () -> handler t r) with
      | info, response -> (0, info, response)
      | exception e -> (Status.to_code Status.Service_error, "", Printexc.to_string e))
  in
  if Hashtbl.mem t.forwarded r.trans_id then Hashtbl.remove t.forwarded r.trans_id
  else queue_return t r.trans_id status info response

let poll ?timeout t =
  let deadline = match timeout with None -> None | Some ms -> deadline ms 0 in
  let rec loop () =
    if not (Queue.is_empty t.queue) then begin
      let r = Queue.pop t.queue in
      (* answers wait for the batch unless the handlers are slow *)
      if t.slow then flush t;
      let started = now () in
      handle t r;
      t.slow <- now () -. started > slow_handler_s;
      loop ()
    end
    else if t.terminated then (flush t; false)
    else
      match next_frame t deadline with
      | None -> flush t; true
      | Some m -> background t m; loop ()
  in
  loop ()

let is_terminated t = t.terminated

let run ?thread_count ?window ?socket ?prefix setup =
  let count =
    match thread_count with Some n -> n | None -> int_of_string (env "CUMULO_THREAD_COUNT" "1")
  in
  let serve thread_index =
    let api = create ?socket ?prefix ?window ~thread_index () in
    Fun.protect ~finally:(fun () -> close api) (fun () ->
        setup api;
        try
          while poll api do
            ()
          done
        with Error (Status.Shutting_down, _) -> () (* the core went away: nothing left to serve *))
  in
  if count <= 1 then serve 0
  else begin
    let failures = ref [] and lock = Mutex.create () in
    let thread i =
      Thread.create
        (fun () ->
          try serve i
          with e ->
            Mutex.lock lock;
            failures := e :: !failures;
            Mutex.unlock lock)
        ()
    in
    List.iter Thread.join (List.init count thread);
    match !failures with [] -> () | e :: _ -> raise e
  end

(* ------------------------------------------------------------ accessors *)

let process_index t = (welcome t).process_index
let process_count t = (welcome t).process_count
let thread_count t = (welcome t).thread_count
let thread_index t = t.index
let timeout_terminate t = (welcome t).timeout_terminate
let node_id t = (welcome t).node_id
let instance_id t = (welcome t).instance_id
let window t = (welcome t).window
let max_frame t = t.frame_limit
let keepalive t = (welcome t).keepalive
let info_encode = Info.encode
let info_parse = Info.parse
