(* Frames of the cumulo wire protocol v1 (proto/PROTOCOL.md section 4):
   encode a message into a buffer, decode one frame's body. Integers on the
   wire are little-endian; u32 fields are OCaml ints, u64 fields Int64
   (their bits: a nonce may be above Int64.max_int). *)

type send = {
  trans_id : string;  (** 16 bytes *)
  timeout : int;
  priority : int;
  flags : int;
  name : string;
  request_info : string;
  request : string;
}

type answer = { trans_id : string; status : int; response_info : string; response : string }

type welcome = {
  version : int;
  node_id : int;
  instance_id : int;
  process_index : int;
  process_count : int;
  thread_count : int;
  window : int;
  max_frame : int;
  timeout_async : int;
  timeout_sync : int;
  timeout_terminate : int;
  priority_default : int;
  keepalive : int;
  prefix : string;
}

(* A REQUEST as decoded, and as a handler receives it (Cumulo.request):
   [sync] and [mcast] are read from [flags] when decoding; encoding writes
   [flags]. *)
type request = {
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

type message =
  | Hello of { version : int; window : int; thread_index : int; token : string; prefix : string }
  | Subscribe of { req_id : int; pattern : string }
  | Unsubscribe of { req_id : int; pattern : string }
  | Subscribe_count of { req_id : int; pattern : string }
  | Send_async of send
  | Send_sync of send
  | Mcast_async of send
  | Forward of send
  | Return of answer
  | Ping of int64
  | Pong of int64
  | Goodbye
  | Welcome of welcome
  | Request of request
  | Response of answer
  | Reply of { req_id : int; status : int; value : int; message : string }
  | Mcast_sent of { trans_id : string; trans_ids : string list }
  | Terminate of int
  | Error of { status : int; message : string }

let type_name = function
  | Hello _ -> "HELLO" | Subscribe _ -> "SUBSCRIBE" | Unsubscribe _ -> "UNSUBSCRIBE"
  | Subscribe_count _ -> "SUBSCRIBE_COUNT" | Send_async _ -> "SEND_ASYNC" | Send_sync _ -> "SEND_SYNC"
  | Mcast_async _ -> "MCAST_ASYNC" | Forward _ -> "FORWARD" | Return _ -> "RETURN" | Ping _ -> "PING"
  | Pong _ -> "PONG" | Goodbye -> "GOODBYE" | Welcome _ -> "WELCOME" | Request _ -> "REQUEST"
  | Response _ -> "RESPONSE" | Reply _ -> "REPLY" | Mcast_sent _ -> "MCAST_SENT" | Terminate _ -> "TERMINATE"
  | Error _ -> "ERROR"

(* ------------------------------------------------------------- encoding *)

exception Out_of_range of string

let check name ok = if not ok then raise (Out_of_range name)
let u8 b name v = check name (v >= 0 && v <= 0xff); Buffer.add_uint8 b v
let i8 b name v = check name (v >= -128 && v <= 127); Buffer.add_int8 b v
let u16 b name v = check name (v >= 0 && v <= 0xffff); Buffer.add_uint16_le b v
let u32 b name v = check name (v >= 0 && v <= 0xffff_ffff); Buffer.add_int32_le b (Int32.of_int v)
let u64 b v = Buffer.add_int64_le b v
let tid b name v = check name (String.length v = 16); Buffer.add_string b v
let str b name v =
  check name (String.length v <= 0xffff && Utf8.valid v);
  Buffer.add_uint16_le b (String.length v);
  Buffer.add_string b v
let bytes b name v = u32 b name (String.length v); Buffer.add_string b v

let add_send b code (s : send) =
  Buffer.add_uint8 b code; tid b "trans_id" s.trans_id; u32 b "timeout" s.timeout;
  i8 b "priority" s.priority; u8 b "flags" s.flags; str b "name" s.name;
  bytes b "request_info" s.request_info; bytes b "request" s.request

let add_answer b code (a : answer) =
  Buffer.add_uint8 b code; tid b "trans_id" a.trans_id; u16 b "status" a.status;
  bytes b "response_info" a.response_info; bytes b "response" a.response

let add_body b = function
  | Hello h ->
    Buffer.add_uint8 b 0x01; u16 b "version" h.version; u32 b "window" h.window;
    u32 b "thread_index" h.thread_index; str b "token" h.token; str b "prefix" h.prefix
  | Subscribe c -> Buffer.add_uint8 b 0x02; u32 b "req_id" c.req_id; str b "pattern" c.pattern
  | Unsubscribe c -> Buffer.add_uint8 b 0x03; u32 b "req_id" c.req_id; str b "pattern" c.pattern
  | Subscribe_count c -> Buffer.add_uint8 b 0x04; u32 b "req_id" c.req_id; str b "pattern" c.pattern
  | Send_async s -> add_send b 0x10 s
  | Send_sync s -> add_send b 0x11 s
  | Mcast_async s -> add_send b 0x12 s
  | Forward s -> add_send b 0x21 s
  | Return a -> add_answer b 0x20 a
  | Ping n -> Buffer.add_uint8 b 0x30; u64 b n
  | Pong n -> Buffer.add_uint8 b 0x31; u64 b n
  | Goodbye -> Buffer.add_uint8 b 0x32
  | Welcome w ->
    Buffer.add_uint8 b 0x81; u16 b "version" w.version;
    List.iter (fun (name, v) -> u32 b name v)
      [ ("node_id", w.node_id); ("instance_id", w.instance_id); ("process_index", w.process_index);
        ("process_count", w.process_count); ("thread_count", w.thread_count); ("window", w.window);
        ("max_frame", w.max_frame); ("timeout_async", w.timeout_async); ("timeout_sync", w.timeout_sync);
        ("timeout_terminate", w.timeout_terminate) ];
    i8 b "priority_default" w.priority_default; u32 b "keepalive" w.keepalive; str b "prefix" w.prefix
  | Request r ->
    Buffer.add_uint8 b 0x82; tid b "trans_id" r.trans_id; u32 b "timeout" r.timeout;
    i8 b "priority" r.priority; u8 b "flags" r.flags; u64 b r.source; str b "name" r.name;
    str b "pattern" r.pattern; bytes b "request_info" r.request_info; bytes b "request" r.request
  | Response a -> add_answer b 0x83 a
  | Reply r ->
    Buffer.add_uint8 b 0x84; u32 b "req_id" r.req_id; u16 b "status" r.status; u32 b "value" r.value;
    str b "message" r.message
  | Mcast_sent m ->
    Buffer.add_uint8 b 0x85; tid b "trans_id" m.trans_id; u32 b "count" (List.length m.trans_ids);
    List.iter (tid b "trans_ids") m.trans_ids
  | Terminate t -> Buffer.add_uint8 b 0x86; u32 b "timeout" t
  | Error e -> Buffer.add_uint8 b 0x87; u16 b "status" e.status; str b "message" e.message

(* Appends the whole frame (length prefix included) to [b]; returns the
   frame's length field (type byte and body). Raises [Out_of_range field]
   for a field out of range, leaving [b] as it was. *)
let add b message =
  let body = Buffer.create 256 in
  add_body body message;
  let length = Buffer.length body in
  Buffer.add_int32_le b (Int32.of_int length);
  Buffer.add_buffer b body;
  length

let encode message =
  let b = Buffer.create 64 in
  ignore (add b message);
  Buffer.contents b

(* ------------------------------------------------------------- decoding *)

exception Bad of string  (* a field that is truncated or invalid *)

(* A cursor over [s] from [pos] to [stop]: reads never pass [stop]. *)
type cursor = { s : string; mutable pos : int; stop : int }

let take c n name =
  if n < 0 || c.stop - c.pos < n then raise (Bad name);
  let p = c.pos in
  c.pos <- p + n;
  p

let r_u8 c name = Char.code c.s.[take c 1 name]
let r_i8 c name = String.get_int8 c.s (take c 1 name)
let r_u16 c name = String.get_uint16_le c.s (take c 2 name)
let r_u32 c name = Int32.to_int (String.get_int32_le c.s (take c 4 name)) land 0xffff_ffff
let r_u64 c name = String.get_int64_le c.s (take c 8 name)
let r_tid c name = String.sub c.s (take c 16 name) 16
let r_str c name =
  let n = r_u16 c name in
  let v = String.sub c.s (take c n name) n in
  if not (Utf8.valid v) then raise (Bad name);
  v
let r_bytes c name =
  let n = r_u32 c name in
  String.sub c.s (take c n name) n

let r_send c : send =
  let trans_id = r_tid c "trans_id" in
  let timeout = r_u32 c "timeout" in
  let priority = r_i8 c "priority" in
  let flags = r_u8 c "flags" in
  let name = r_str c "name" in
  let request_info = r_bytes c "request_info" in
  let request = r_bytes c "request" in
  { trans_id; timeout; priority; flags; name; request_info; request }

let r_answer c : answer =
  let trans_id = r_tid c "trans_id" in
  let status = r_u16 c "status" in
  let response_info = r_bytes c "response_info" in
  let response = r_bytes c "response" in
  { trans_id; status; response_info; response }

let r_control c =
  let req_id = r_u32 c "req_id" in
  let pattern = r_str c "pattern" in
  (req_id, pattern)

let r_body code c =
  match code with
  | 0x01 ->
    let version = r_u16 c "version" in
    let window = r_u32 c "window" in
    let thread_index = r_u32 c "thread_index" in
    let token = r_str c "token" in
    let prefix = r_str c "prefix" in
    Hello { version; window; thread_index; token; prefix }
  | 0x02 -> let req_id, pattern = r_control c in Subscribe { req_id; pattern }
  | 0x03 -> let req_id, pattern = r_control c in Unsubscribe { req_id; pattern }
  | 0x04 -> let req_id, pattern = r_control c in Subscribe_count { req_id; pattern }
  | 0x10 -> Send_async (r_send c)
  | 0x11 -> Send_sync (r_send c)
  | 0x12 -> Mcast_async (r_send c)
  | 0x21 -> Forward (r_send c)
  | 0x20 -> Return (r_answer c)
  | 0x30 -> Ping (r_u64 c "nonce")
  | 0x31 -> Pong (r_u64 c "nonce")
  | 0x32 -> Goodbye
  | 0x81 ->
    let version = r_u16 c "version" in
    let node_id = r_u32 c "node_id" in
    let instance_id = r_u32 c "instance_id" in
    let process_index = r_u32 c "process_index" in
    let process_count = r_u32 c "process_count" in
    let thread_count = r_u32 c "thread_count" in
    let window = r_u32 c "window" in
    let max_frame = r_u32 c "max_frame" in
    let timeout_async = r_u32 c "timeout_async" in
    let timeout_sync = r_u32 c "timeout_sync" in
    let timeout_terminate = r_u32 c "timeout_terminate" in
    let priority_default = r_i8 c "priority_default" in
    let keepalive = r_u32 c "keepalive" in
    let prefix = r_str c "prefix" in
    Welcome { version; node_id; instance_id; process_index; process_count; thread_count; window; max_frame;
              timeout_async; timeout_sync; timeout_terminate; priority_default; keepalive; prefix }
  | 0x82 ->
    let trans_id = r_tid c "trans_id" in
    let timeout = r_u32 c "timeout" in
    let priority = r_i8 c "priority" in
    let flags = r_u8 c "flags" in
    let source = r_u64 c "source" in
    let name = r_str c "name" in
    let pattern = r_str c "pattern" in
    let request_info = r_bytes c "request_info" in
    let request = r_bytes c "request" in
    let sync = flags land 1 <> 0 and mcast = flags land 2 <> 0 in
    Request { trans_id; timeout; priority; flags; source; name; pattern; request_info; request; sync; mcast }
  | 0x83 -> Response (r_answer c)
  | 0x84 ->
    let req_id = r_u32 c "req_id" in
    let status = r_u16 c "status" in
    let value = r_u32 c "value" in
    let message = r_str c "message" in
    Reply { req_id; status; value; message }
  | 0x85 ->
    let trans_id = r_tid c "trans_id" in
    let count = r_u32 c "count" in
    if count > (c.stop - c.pos) / 16 then raise (Bad "trans_ids");
    let trans_ids = List.init count (fun _ -> r_tid c "trans_ids") in
    Mcast_sent { trans_id; trans_ids }
  | 0x86 -> Terminate (r_u32 c "timeout")
  | 0x87 ->
    let status = r_u16 c "status" in
    let message = r_str c "message" in
    Error { status; message }
  | code -> Status.fail Status.Malformed "unknown frame type 0x%02x" code

(* Decodes the frame whose type byte is at [pos] of [s] and whose body runs
   to [stop]. Raises [Status.Error (Malformed, _)]. *)
let decode_at s pos stop =
  if stop <= pos then Status.fail Status.Malformed "frame length 0";
  let code = Char.code s.[pos] in
  let c = { s; pos = pos + 1; stop } in
  match r_body code c with
  | message ->
    if c.pos <> stop then
      Status.fail Status.Malformed "%s: %d trailing bytes" (type_name message) (stop - c.pos);
    message
  | exception Bad field -> Status.fail Status.Malformed "frame type 0x%02x: field %s is truncated or invalid" code field

(* The length field of the frame at [pos] of [s] (4 bytes there). *)
let length_at s pos = Int32.to_int (String.get_int32_le s pos) land 0xffff_ffff

(* Decodes one whole frame (length prefix included). A length over [limit]
   raises [Status.Error (Too_large, _)] before the body is looked at. *)
let decode ?(limit = (8 * 1024 * 1024) + 65545) s =
  if String.length s < 4 then Status.fail Status.Malformed "truncated length field";
  let length = length_at s 0 in
  if length > limit then Status.fail Status.Too_large "frame of %d bytes over the limit of %d" length limit;
  if length = 0 then Status.fail Status.Malformed "frame length 0";
  if String.length s - 4 <> length then Status.fail Status.Malformed "frame length does not match its bytes";
  decode_at s 4 (String.length s)
