//! One instance: a connection to the core and every call of the protocol.

use crate::conn::{Conn, Stream};
use crate::error::{Error, Result};
use cumulo_proto::{
    decode, kind, Control, Frame, Hello, Return, Send, Status, TransId, TransIdGen, REQUEST_SYNC,
    SEND_WAIT_FOR_SERVICE,
};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

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

type Handler = Rc<RefCell<dyn FnMut(&mut Api, &Request<'_>) -> HandlerResult>>;

/// A response to a request this instance sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub trans_id: TransId,
    pub info: Vec<u8>,
    pub body: Vec<u8>,
}

/// Options of one send.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOptions {
    /// Milliseconds; 0 uses the service's default.
    pub timeout: u32,
    pub priority: i8,
    /// If nobody subscribes the name yet, wait for a subscriber until the
    /// timeout instead of failing at once with NO_SERVICE.
    pub wait_for_service: bool,
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
        })
    }

    /// An unmanaged instance (a tool, a test, a load generator).
    pub fn unmanaged(socket: impl Into<String>, prefix: impl Into<String>) -> Options {
        Options { socket: socket.into(), token: String::new(), prefix: prefix.into(), thread_index: 0, window: 1 }
    }
}

/// One instance. Not shared between threads: open one per thread.
pub struct Api {
    conn: Conn,
    ids: TransIdGen,
    next_req_id: u32,
    handlers: HashMap<String, Handler>,
    /// Requests that arrived while a send_sync waited.
    pending: VecDeque<OwnedRequest>,
    /// Responses to async sends, until recv_async takes them.
    responses: VecDeque<(TransId, Result<Response>)>,
    terminated: bool,
    /// The request being handled, copied out of the read buffer.
    scratch: Vec<u8>,
    /// Deadline of the request being handled, if any.
    handling_deadline: Option<Instant>,
    /// The core's frame limit (WELCOME's max_frame): a bigger frame is
    /// refused here, before the core would refuse it and close the connection.
    send_limit: usize,
    pub node_id: u32,
    pub instance_id: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
    pub window: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
    pub prefix: String,
}

#[derive(Debug)]
struct OwnedRequest {
    name: String,
    pattern: String,
    info: Vec<u8>,
    body: Vec<u8>,
    timeout: u32,
    priority: i8,
    trans_id: TransId,
    source: u64,
    sync: bool,
}

fn status_error(status: u16, message: &[u8]) -> Error {
    Error::Status { status: Status::from_code(status), message: String::from_utf8_lossy(message).into_owned() }
}

impl Api {
    /// Connects thread `thread_index` of a process started by the core.
    pub fn new(thread_index: u32) -> Result<Api> {
        Api::connect(Options::from_env(thread_index)?)
    }

    pub fn connect(o: Options) -> Result<Api> {
        let mut conn = Conn::new(Stream::connect(&o.socket)?);
        cumulo_proto::encode_hello(
            &mut conn.wbuf,
            &Hello { version: cumulo_proto::VERSION, window: o.window.max(1), thread_index: o.thread_index, token: &o.token, prefix: &o.prefix },
        );
        let (s, e) = conn.next_frame(Some(Duration::from_secs(30)))?.ok_or_else(|| Error::Protocol("no WELCOME within 30 s".into()))?;
        let w = match decode(&conn.rbuf[s..e]).map_err(|e| Error::Protocol(e.to_string()))? {
            Frame::Welcome(w) => (
                [w.node_id, w.instance_id, w.process_index, w.process_count, w.thread_count, w.window],
                [w.timeout_async, w.timeout_sync, w.timeout_terminate, w.max_frame],
                w.priority_default,
                w.prefix.to_string(),
            ),
            Frame::Error(err) => return Err(status_error(err.status, err.message.as_bytes())),
            other => return Err(Error::Protocol(format!("expected WELCOME, got {}", other.type_name()))),
        };
        let ([node_id, instance_id, process_index, process_count, thread_count, window], [ta, ts, tt, max_frame], prio, prefix) = w;
        conn.rstart = e;
        conn.max_frame = max_frame.saturating_add(cumulo_proto::REQUEST_OVERHEAD);
        Ok(Api {
            conn,
            ids: TransIdGen::new(node_id, instance_id),
            next_req_id: 1,
            handlers: HashMap::new(),
            pending: VecDeque::new(),
            responses: VecDeque::new(),
            terminated: false,
            scratch: Vec::new(),
            handling_deadline: None,
            send_limit: max_frame as usize,
            node_id,
            instance_id,
            process_index,
            process_count,
            thread_count,
            window,
            timeout_async: ta,
            timeout_sync: ts,
            timeout_terminate: tt,
            priority_default: prio,
            prefix,
        })
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
                result = Some(if r.status == 0 { Ok(r.value) } else { Err(status_error(r.status, r.message.as_bytes())) });
                true
            }
            _ => false,
        })?;
        result.unwrap()
    }

    /// Queues a send; a frame over the core's limit is not queued and its
    /// TOO_LARGE error is returned instead.
    fn send_frame(&mut self, ty: u8, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> (TransId, Result<()>) {
        let tid = self.ids.next();
        let flags = if o.wait_for_service { SEND_WAIT_FOR_SERVICE } else { 0 };
        let timeout = self.nested_timeout(ty, o.timeout);
        let s = Send { trans_id: tid, timeout, priority: o.priority, flags, name, request_info: info, request: body };
        let start = self.conn.wbuf.len();
        cumulo_proto::encode_send(&mut self.conn.wbuf, ty, &s);
        (tid, self.within_limit(start))
    }

    /// Takes back the frame queued from `start` if it is over the core's
    /// limit (the core would answer ERROR TOO_LARGE and close the connection).
    fn within_limit(&mut self, start: usize) -> Result<()> {
        let len = self.conn.wbuf.len() - start - cumulo_proto::LEN_PREFIX;
        if len <= self.send_limit {
            return Ok(());
        }
        self.conn.wbuf.truncate(start);
        Err(Error::Status {
            status: Status::TooLarge,
            message: format!("a frame of {len} bytes is over the core's limit of {} bytes (core.max_frame)", self.send_limit),
        })
    }

    /// A send made while handling a request keeps that request's deadline:
    /// its timeout is at most what is left of it, so the deadline travels
    /// end to end.
    fn nested_timeout(&self, ty: u8, asked: u32) -> u32 {
        let Some(deadline) = self.handling_deadline else { return asked };
        let left = deadline.saturating_duration_since(Instant::now()).as_millis().clamp(1, u32::MAX as u128) as u32;
        let asked = match asked {
            0 if ty == kind::SEND_SYNC => self.timeout_sync,
            0 => self.timeout_async,
            t => t,
        };
        asked.min(left)
    }

    /// Sends without waiting; the answer is collected with `recv_async`.
    /// The frame is written at the next flush (any wait, or `flush`). A
    /// request too large for the core is not sent: its answer is a
    /// TOO_LARGE error, there at once.
    pub fn send_async(&mut self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> TransId {
        let (tid, queued) = self.send_frame(kind::SEND_ASYNC, name, info, body, o);
        if let Err(e) = queued {
            self.responses.push_back((tid, Err(e)));
        }
        tid
    }

    /// Sends and waits for the answer.
    pub fn send_sync(&mut self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Result<Response> {
        let (tid, queued) = self.send_frame(kind::SEND_SYNC, name, info, body, o);
        queued?;
        let timeout = if o.timeout == 0 { self.timeout_sync } else { o.timeout };
        self.await_response(tid, timeout)
    }

    /// Sends one copy to every instance subscribed to a matching pattern;
    /// returns their trans_ids (collect the answers with `recv_async`).
    pub fn mcast_async(&mut self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Result<Vec<TransId>> {
        let (call, queued) = self.send_frame(kind::MCAST_ASYNC, name, info, body, o);
        queued?;
        let mut ids = None;
        self.wait_for(None, |f| match f {
            Frame::McastSent(m) if m.trans_id == call => {
                ids = Some(m.ids().collect());
                true
            }
            _ => false,
        })?;
        Ok(ids.unwrap())
    }

    /// The answer to an async send: of `tid`, or of whichever arrives next.
    /// `Ok(None)` if nothing arrived within `wait`.
    pub fn recv_async(&mut self, tid: Option<TransId>, wait: Duration) -> Result<Option<(TransId, Result<Response>)>> {
        let deadline = Instant::now() + wait;
        loop {
            let pos = match tid {
                Some(t) => self.responses.iter().position(|(x, _)| *x == t),
                None => (!self.responses.is_empty()).then_some(0),
            };
            if let Some(p) = pos {
                return Ok(self.responses.remove(p));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.read_one(Some(left))? {
                return Ok(None);
            }
        }
    }

    fn await_response(&mut self, tid: TransId, timeout_ms: u32) -> Result<Response> {
        // The core always answers (TIMEOUT at the latest); the margin only
        // guards against a core that stopped answering altogether.
        let guard = Duration::from_millis(timeout_ms as u64) + Duration::from_secs(5);
        let r = self.recv_async(Some(tid), guard)?;
        match r {
            Some((_, r)) => r,
            None => Err(Error::Status { status: Status::Timeout, message: "the core did not answer".into() }),
        }
    }

    /// Reads frames until `done` accepts one; everything else is handled
    /// as `read_one` does.
    fn wait_for(&mut self, limit: Option<Duration>, mut done: impl FnMut(&Frame<'_>) -> bool) -> Result<()> {
        loop {
            let (s, e) = match self.conn.next_frame(limit)? {
                Some(r) => r,
                None => return Err(Error::Status { status: Status::Timeout, message: "no answer from the core".into() }),
            };
            let frame = decode(&self.conn.rbuf[s..e]).map_err(|e| Error::Protocol(e.to_string()))?;
            if done(&frame) {
                self.conn.rstart = e;
                return Ok(());
            }
            self.absorb(s, e)?;
        }
    }

    /// Reads and files one frame (requests are queued for `poll`).
    /// Ok(false) when nothing came within `wait`.
    fn read_one(&mut self, wait: Option<Duration>) -> Result<bool> {
        match self.conn.next_frame(wait)? {
            Some((s, e)) => {
                self.absorb(s, e)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Files a frame that nobody is waiting for in particular.
    fn absorb(&mut self, s: usize, e: usize) -> Result<()> {
        let frame = decode(&self.conn.rbuf[s..e]).map_err(|e| Error::Protocol(e.to_string()))?;
        let mut pong = None;
        match frame {
            Frame::Response(r) => {
                let result = if r.status == 0 {
                    Ok(Response { trans_id: r.trans_id, info: r.response_info.to_vec(), body: r.response.to_vec() })
                } else {
                    Err(status_error(r.status, r.response))
                };
                self.responses.push_back((r.trans_id, result));
            }
            Frame::Request(r) => self.pending.push_back(OwnedRequest {
                name: r.name.into(),
                pattern: r.pattern.into(),
                info: r.request_info.into(),
                body: r.request.into(),
                timeout: r.timeout,
                priority: r.priority,
                trans_id: r.trans_id,
                source: r.source,
                sync: r.flags & REQUEST_SYNC != 0,
            }),
            Frame::Ping(n) => pong = Some(n),
            Frame::Terminate(_) => self.terminated = true,
            Frame::Error(err) => {
                self.conn.rstart = e;
                return Err(status_error(err.status, err.message.as_bytes()));
            }
            _ => {} // replies nobody waits for any more
        }
        self.conn.rstart = e;
        if let Some(n) = pong {
            cumulo_proto::encode_ping(&mut self.conn.wbuf, kind::PONG, n);
        }
        Ok(())
    }

    /// Writes any buffered frames now.
    pub fn flush(&mut self) -> Result<()> {
        self.conn.flush()
    }

    /// Has the core asked this instance to terminate?
    pub fn terminated(&self) -> bool {
        self.terminated
    }

    /// The event loop: handles requests until TERMINATE (returns Ok(false))
    /// or until `wait` passes with nothing to do (returns Ok(true)).
    pub fn poll(&mut self, wait: Option<Duration>) -> Result<bool> {
        let deadline = wait.map(|w| Instant::now() + w);
        loop {
            while let Some(q) = self.pending.pop_front() {
                let req = Request {
                    name: &q.name,
                    pattern: &q.pattern,
                    request_info: &q.info,
                    request: &q.body,
                    timeout: q.timeout,
                    priority: q.priority,
                    trans_id: q.trans_id,
                    source: q.source,
                    sync: q.sync,
                };
                self.handle(&req);
            }
            if self.terminated {
                self.conn.flush()?;
                return Ok(false);
            }
            // `wait` bounds the whole call, not each read: PINGs and other
            // frames must not keep restarting it.
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Ok(true);
            }
            let Some((s, e)) = self.conn.next_frame(left)? else { return Ok(true) };
            if self.conn.rbuf[s] != kind::REQUEST {
                self.absorb(s, e)?;
                continue;
            }
            // The handler may use this Api (send_sync, ...) while it runs, so
            // the request is copied out of the read buffer into a scratch
            // buffer (one small copy, no allocation once warmed up) and
            // borrowed from there.
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            scratch.extend_from_slice(&self.conn.rbuf[s..e]);
            self.conn.rstart = e;
            let outcome = match decode(&scratch) {
                Ok(Frame::Request(r)) => {
                    let req = Request {
                        name: r.name,
                        pattern: r.pattern,
                        request_info: r.request_info,
                        request: r.request,
                        timeout: r.timeout,
                        priority: r.priority,
                        trans_id: r.trans_id,
                        source: r.source,
                        sync: r.flags & REQUEST_SYNC != 0,
                    };
                    self.handle(&req);
                    Ok(())
                }
                Ok(_) => Ok(()),
                Err(err) => Err(Error::Protocol(err.to_string())),
            };
            self.scratch = scratch;
            outcome?;
        }
    }

    /// Runs the handler of a request and queues its RETURN (or FORWARD).
    fn handle(&mut self, req: &Request<'_>) {
        let handler = self.handlers.get(req.pattern).cloned();
        self.handling_deadline = Some(Instant::now() + Duration::from_millis(req.timeout as u64));
        let result: HandlerResult = match handler {
            None => Err(format!("no handler for pattern '{}' in this instance", req.pattern).into()),
            Some(h) => match catch_unwind(AssertUnwindSafe(|| (h.borrow_mut())(self, req))) {
                Ok(r) => r,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    Err(format!("handler panicked: {what}").into())
                }
            },
        };
        self.handling_deadline = None;
        let start = self.conn.wbuf.len();
        self.encode_answer(req, result);
        if let Err(Error::Status { status, message }) = self.within_limit(start) {
            // The sender gets the reason instead of a frame the core would refuse.
            let r = Return { trans_id: req.trans_id, status: status.code(), response_info: b"", response: message.as_bytes() };
            cumulo_proto::encode_return(&mut self.conn.wbuf, kind::RETURN, &r);
        }
    }

    fn encode_answer(&mut self, req: &Request<'_>, result: HandlerResult) {
        let w = &mut self.conn.wbuf;
        match result {
            Ok(Answer::Return { info, body }) => cumulo_proto::encode_return(
                w,
                kind::RETURN,
                &Return { trans_id: req.trans_id, status: 0, response_info: &info, response: &body },
            ),
            Ok(Answer::Forward { name, info, body, timeout, priority }) => cumulo_proto::encode_send(
                w,
                kind::FORWARD,
                &Send {
                    trans_id: req.trans_id,
                    timeout,
                    priority: priority.unwrap_or(req.priority),
                    flags: 0,
                    name: &name,
                    request_info: &info,
                    request: &body,
                },
            ),
            Err(e) => {
                let msg = format!("{e}");
                cumulo_proto::encode_return(
                    w,
                    kind::RETURN,
                    &Return {
                        trans_id: req.trans_id,
                        status: Status::ServiceError.code(),
                        response_info: b"",
                        response: msg.as_bytes(),
                    },
                )
            }
        }
    }
}

