//! One instance: the connection to the core, what WELCOME said, the
//! subscriptions, and closing with GOODBYE. Sending is in `send.rs`, the
//! event loop in `serve.rs`.

use crate::conn::{Conn, Stream};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::tls::TlsFiles;
use cumulo_proto::{kind, Control, Frame, Hello, Status, TransId, TransIdGen};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long `connect` waits for WELCOME, seconds: the core answers HELLO at
/// once, so this only bounds a core that accepted the connection and hung.
const WELCOME_WAIT: Duration = Duration::from_secs(30);

/// How long closing may block on writing what is still buffered and
/// GOODBYE: a core that has not read its socket for this long is stuck, and
/// dropping an instance must not hang the program.
const CLOSE_WRITE_WAIT: Duration = Duration::from_secs(5);

/// A request as a handler sees it. Borrowed from the read buffer: no copy.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub name: &'a str,
    pub pattern: &'a str,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
    /// Milliseconds left before the sender gets a timeout.
    pub timeout: u32,
    pub priority: i8,
    pub trans_id: TransId,
    /// `node_id << 32 | instance_id` of the sender (0 = the core).
    pub source: u64,
    /// Sent with send_sync (else send_async or a multicast copy).
    pub sync: bool,
}

/// What a handler answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Return a response (and its response_info, key/value encoded).
    Return { info: Vec<u8>, body: Vec<u8> },
    /// Pass the request on to another name; the original sender gets that
    /// service's answer. Zero timeout keeps the time left.
    /// `priority` None keeps the original request's.
    Forward { name: String, info: Vec<u8>, body: Vec<u8>, timeout: u32, priority: Option<i8> },
}

impl Answer {
    pub fn body(body: impl Into<Vec<u8>>) -> Answer {
        Answer::Return { info: Vec::new(), body: body.into() }
    }
    pub fn with_info(info: impl Into<Vec<u8>>, body: impl Into<Vec<u8>>) -> Answer {
        Answer::Return { info: info.into(), body: body.into() }
    }
    pub fn forward(name: impl Into<String>, info: impl Into<Vec<u8>>, body: impl Into<Vec<u8>>) -> Answer {
        Answer::Forward { name: name.into(), info: info.into(), body: body.into(), timeout: 0, priority: None }
    }
}

/// A handler's result: an answer, or an error that becomes a SERVICE_ERROR
/// response to the sender.
pub type HandlerResult = std::result::Result<Answer, Box<dyn std::error::Error>>;

pub(crate) type Handler = Rc<RefCell<dyn FnMut(&mut Api, &Request<'_>) -> HandlerResult>>;

/// A response to a request this instance sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub trans_id: TransId,
    pub info: Vec<u8>,
    pub body: Vec<u8>,
}

/// Options of one send. `SendOptions::default()` sends with the service's
/// default timeout and priority (WELCOME's `timeout_sync`/`timeout_async`
/// and `priority_default`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOptions {
    /// Milliseconds; 0 uses the service's default.
    pub timeout: u32,
    /// -128 .. 127, lower is more urgent. 0 uses the service's default
    /// (`Api::priority_default`), as a timeout of 0 does, unless
    /// `exact_priority` is set.
    pub priority: i8,
    /// If nobody subscribes the name yet, wait for a subscriber until the
    /// timeout instead of failing at once with NO_SERVICE.
    pub wait_for_service: bool,
    /// Send `priority` as given, even a 0 where the service's default is
    /// another priority.
    pub exact_priority: bool,
}

/// How to reach the core and who this instance is.
#[derive(Debug, Clone)]
pub struct Options {
    /// A Unix socket path or `tcp://host:port`.
    pub socket: String,
    /// Empty for an unmanaged instance.
    pub token: String,
    /// The prefix of an unmanaged instance (ignored for managed ones).
    pub prefix: String,
    pub thread_index: u32,
    /// Requests the core may deliver at once. The SDK handles them in order
    /// but they arrive pipelined, so the instance never waits a round trip
    /// for its next request.
    pub window: u32,
    /// TLS over `tcp://` when `tls.ca` is set: from `CUMULO_TLS_CA`,
    /// `CUMULO_TLS_CERT` and `CUMULO_TLS_KEY` unless the program sets them.
    pub tls: TlsFiles,
}

impl Options {
    /// From the environment the core gives its processes.
    pub fn from_env(thread_index: u32) -> Result<Options> {
        let socket = std::env::var("CUMULO_SOCKET")
            .map_err(|_| Error::Protocol("CUMULO_SOCKET is not set: was this process started by cumulo?".into()))?;
        Ok(Options {
            socket,
            token: std::env::var("CUMULO_TOKEN").unwrap_or_default(),
            prefix: std::env::var("CUMULO_PREFIX").unwrap_or_default(),
            thread_index,
            window: 1,
            tls: TlsFiles::from_env(),
        })
    }

    /// An unmanaged instance (a tool, a test, a load generator).
    pub fn unmanaged(socket: impl Into<String>, prefix: impl Into<String>) -> Options {
        Options {
            socket: socket.into(),
            token: String::new(),
            prefix: prefix.into(),
            thread_index: 0,
            window: 1,
            tls: TlsFiles::from_env(),
        }
    }
}

/// One instance. Not shared between threads: open one per thread.
///
/// The public fields are what the core said in WELCOME (and the
/// `thread_index` this instance was opened with): read them. Changing one
/// changes nothing in the session, except `priority_default`, which is the
/// priority of later sends that do not name one.
///
/// Closing (`close`, or dropping the `Api`) writes what is still buffered,
/// then GOODBYE, and closes the connection.
pub struct Api {
    pub(crate) conn: Conn,
    pub(crate) ids: TransIdGen,
    next_req_id: u32,
    pub(crate) handlers: HashMap<String, Handler>,
    pub(crate) inbox: Inbox,
    /// The request being handled, copied out of the read buffer.
    pub(crate) scratch: Vec<u8>,
    /// Deadline of the request being handled, if any.
    pub(crate) handling_deadline: Option<Instant>,
    /// Trace context of the request being handled, which its handler's
    /// outgoing requests inherit (PROTOCOL.md 5.1).
    pub(crate) trace: crate::trace::TraceContext,
    /// The core's frame limit (WELCOME's max_frame): a bigger frame is
    /// refused here, before the core would refuse it and close the connection.
    pub(crate) send_limit: usize,
    /// GOODBYE was sent (or the connection is gone): nothing more to write.
    closed: bool,
    pub node_id: u32,
    pub instance_id: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
    /// Which of its process's connections this instance is (`HELLO.thread_index`).
    pub thread_index: u32,
    /// Requests the core delivers at once (granted, at most the one asked).
    pub window: u32,
    /// Largest frame the core accepts, bytes.
    pub max_frame: u32,
    /// Default timeouts, ms.
    pub timeout_async: u32,
    pub timeout_sync: u32,
    /// Time the core gives this instance to finish after TERMINATE, ms.
    pub timeout_terminate: u32,
    /// The priority of a send that does not name one.
    pub priority_default: i8,
    /// The core's keep-alive interval, ms: it PINGs this often, and closes a
    /// serving instance that stays silent for 3 intervals.
    pub keepalive: u32,
    pub prefix: String,
}

pub(crate) fn status_error(status: u16, message: &[u8]) -> Error {
    Error::Status { status: Status::from_code(status), message: String::from_utf8_lossy(message).into_owned() }
}

impl Api {
    /// Connects thread `thread_index` of a process started by the core.
    pub fn new(thread_index: u32) -> Result<Api> {
        Api::connect(Options::from_env(thread_index)?)
    }

    /// Connects, sends HELLO and waits for WELCOME (or returns the core's ERROR).
    pub fn connect(o: Options) -> Result<Api> {
        let mut conn = Conn::new(Stream::connect(&o.socket, &o.tls)?);
        let hello = Hello {
            version: cumulo_proto::VERSION,
            window: o.window.max(1),
            thread_index: o.thread_index,
            token: &o.token,
            prefix: &o.prefix,
        };
        cumulo_proto::encode_hello(&mut conn.wbuf, &hello);
        let (s, e) =
            conn.next_frame(Some(WELCOME_WAIT))?.ok_or_else(|| Error::Protocol("no WELCOME within 30 s".into()))?;
        let w = match crate::decode_frame(&conn.rbuf[s..e])? {
            Frame::Welcome(w) => w,
            Frame::Error(err) => return Err(status_error(err.status, err.message.as_bytes())),
            other => return Err(Error::Protocol(format!("expected WELCOME, got {}", other.type_name()))),
        };
        // `w` borrows the read buffer: every field is copied out before
        // `conn` moves (it is the last field of the literal).
        let mut api = Api {
            ids: TransIdGen::new(w.node_id, w.instance_id),
            next_req_id: 1,
            handlers: HashMap::new(),
            inbox: Inbox::default(),
            scratch: Vec::new(),
            handling_deadline: None,
            trace: Default::default(),
            send_limit: w.max_frame as usize,
            closed: false,
            node_id: w.node_id,
            instance_id: w.instance_id,
            process_index: w.process_index,
            process_count: w.process_count,
            thread_count: w.thread_count,
            thread_index: o.thread_index,
            window: w.window,
            max_frame: w.max_frame,
            timeout_async: w.timeout_async,
            timeout_sync: w.timeout_sync,
            timeout_terminate: w.timeout_terminate,
            priority_default: w.priority_default,
            keepalive: w.keepalive,
            prefix: w.prefix.to_string(),
            conn,
        };
        api.conn.rstart = e;
        api.conn.max_frame = api.max_frame.saturating_add(cumulo_proto::REQUEST_OVERHEAD);
        Ok(api)
    }

    /// Subscribes `pattern` (relative to the prefix) with a handler.
    pub fn subscribe<F>(&mut self, pattern: &str, handler: F) -> Result<()>
    where
        F: FnMut(&mut Api, &Request<'_>) -> HandlerResult + 'static,
    {
        self.control(kind::SUBSCRIBE, pattern)?;
        self.handlers.insert(format!("{}{}", self.prefix, pattern), Rc::new(RefCell::new(handler)));
        Ok(())
    }

    /// Removes one subscription of `pattern`; its handler goes with the last one.
    pub fn unsubscribe(&mut self, pattern: &str) -> Result<()> {
        self.control(kind::UNSUBSCRIBE, pattern)?;
        let full = format!("{}{}", self.prefix, pattern);
        if self.subscribe_count(pattern)? == 0 {
            self.handlers.remove(&full);
        }
        Ok(())
    }

    /// How many times this instance subscribed `pattern`.
    pub fn subscribe_count(&mut self, pattern: &str) -> Result<u32> {
        self.control(kind::SUBSCRIBE_COUNT, pattern)
    }

    fn control(&mut self, ty: u8, pattern: &str) -> Result<u32> {
        let req_id = self.next_req_id;
        self.next_req_id = self.next_req_id.wrapping_add(1);
        cumulo_proto::encode_control(&mut self.conn.wbuf, ty, &Control { req_id, pattern });
        let mut result = None;
        self.wait_for(None, |f| match f {
            Frame::Reply(r) if r.req_id == req_id => {
                result =
                    Some(if r.status == 0 { Ok(r.value) } else { Err(status_error(r.status, r.message.as_bytes())) });
                true
            }
            _ => false,
        })?;
        result.unwrap()
    }

    /// Reads frames until `done` accepts one, decoding each frame once;
    /// every other frame is filed (responses kept, requests queued, PINGs
    /// answered).
    pub(crate) fn wait_for(&mut self, limit: Option<Duration>, mut done: impl FnMut(&Frame<'_>) -> bool) -> Result<()> {
        loop {
            let (s, e) = match self.conn.next_frame(limit)? {
                Some(r) => r,
                None => {
                    return Err(Error::Status { status: Status::Timeout, message: "no answer from the core".into() })
                }
            };
            let frame = crate::decode_frame(&self.conn.rbuf[s..e])?;
            let finished = done(&frame);
            let filed = if finished { Ok(()) } else { self.inbox.file(frame, &mut self.conn.wbuf) };
            self.conn.rstart = e;
            filed?;
            if finished {
                return Ok(());
            }
        }
    }

    /// Reads and files one frame (requests are queued for `poll`).
    /// Ok(false) when nothing came within `wait`.
    pub(crate) fn read_one(&mut self, wait: Option<Duration>) -> Result<bool> {
        let Some((s, e)) = self.conn.next_frame(wait)? else { return Ok(false) };
        let frame = crate::decode_frame(&self.conn.rbuf[s..e])?;
        let filed = self.inbox.file(frame, &mut self.conn.wbuf);
        self.conn.rstart = e;
        filed.map(|()| true)
    }

    /// Writes any buffered frames now.
    pub fn flush(&mut self) -> Result<()> {
        self.conn.flush()
    }

    /// Has the core asked this instance to terminate?
    pub fn terminated(&self) -> bool {
        self.inbox.terminated
    }

    /// Writes what is still buffered, then GOODBYE, and closes the
    /// connection (PROTOCOL.md 4.1: the core routes nothing more to this
    /// instance; requests it holds unanswered fail with CRASHED). Dropping
    /// an `Api` does the same, ignoring errors.
    pub fn close(mut self) -> Result<()> {
        self.goodbye()
    }

    fn goodbye(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        cumulo_proto::encode_goodbye(&mut self.conn.wbuf);
        self.conn.set_write_timeout(Some(CLOSE_WRITE_WAIT))?;
        self.conn.flush()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        // Best effort: the core may already have closed the connection.
        let _ = self.goodbye();
    }
}
