//! Requests to this instance: the event loop, and running a handler into
//! its RETURN or FORWARD.

use crate::api::{Answer, Api, Request};
use crate::error::{Error, Result};
use cumulo_proto::{kind, Frame, Return, Send, Status, REQUEST_SYNC};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// Why a request could not be handled, and the status its sender gets.
enum Failure {
    /// No handler for the request's pattern (say, it raced an unsubscribe).
    NoHandler(String),
    /// The handler returned an error or panicked.
    Handler(String),
}

impl Api {
    /// The event loop: handles requests until TERMINATE (returns Ok(false))
    /// or until `wait` passes with nothing to do (returns Ok(true)).
    pub fn poll(&mut self, wait: Option<Duration>) -> Result<bool> {
        let deadline = wait.map(|w| Instant::now() + w);
        loop {
            while let Some(q) = self.inbox.pending.pop_front() {
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
            if self.inbox.terminated {
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
                let frame = crate::decode_frame(&self.conn.rbuf[s..e])?;
                let filed = self.inbox.file(frame, &mut self.conn.wbuf);
                self.conn.rstart = e;
                filed?;
                continue;
            }
            // The handler may use this Api (send_sync, ...) while it runs, so
            // the request is copied out of the read buffer into a scratch
            // buffer (one small copy, no allocation once warmed up), and
            // decoded and borrowed from there.
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.clear();
            scratch.extend_from_slice(&self.conn.rbuf[s..e]);
            self.conn.rstart = e;
            let outcome = match crate::decode_frame(&scratch) {
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
                Ok(other) => Err(Error::Protocol(format!("a REQUEST decoded as {}", other.type_name()))),
                Err(err) => Err(err),
            };
            self.scratch = scratch;
            outcome?;
        }
    }

    /// Runs the handler of a request and queues its RETURN (or FORWARD).
    fn handle(&mut self, req: &Request<'_>) {
        let handler = self.handlers.get(req.pattern).cloned();
        self.handling_deadline = Some(Instant::now() + Duration::from_millis(req.timeout as u64));
        self.trace.enter(req.request_info);
        let result: std::result::Result<Answer, Failure> = match handler {
            None => Err(Failure::NoHandler(format!("no handler for pattern {}", req.pattern))),
            Some(h) => match catch_unwind(AssertUnwindSafe(|| (h.borrow_mut())(self, req))) {
                Ok(r) => r.map_err(|e| Failure::Handler(e.to_string())),
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    Err(Failure::Handler(format!("handler panicked: {what}")))
                }
            },
        };
        self.handling_deadline = None;
        let start = self.conn.wbuf.len();
        self.encode_answer(req, result);
        self.trace.leave();
        if let Err(Error::Status { status, message }) = self.within_limit(start) {
            // The sender gets the reason instead of a frame the core would refuse.
            let r = Return {
                trans_id: req.trans_id,
                status: status.code(),
                response_info: b"",
                response: message.as_bytes(),
            };
            cumulo_proto::encode_return(&mut self.conn.wbuf, kind::RETURN, &r);
        }
    }

    fn encode_answer(&mut self, req: &Request<'_>, result: std::result::Result<Answer, Failure>) {
        let w = &mut self.conn.wbuf;
        let (status, message) = match result {
            Ok(Answer::Return { info, body }) => {
                let r = Return { trans_id: req.trans_id, status: 0, response_info: &info, response: &body };
                return cumulo_proto::encode_return(w, kind::RETURN, &r);
            }
            Ok(Answer::Forward { name, info, body, timeout, priority }) => {
                let s = Send {
                    trans_id: req.trans_id,
                    timeout,
                    priority: priority.unwrap_or(req.priority),
                    flags: 0,
                    name: &name,
                    request_info: self.trace.apply(&info),
                    request: &body,
                };
                return cumulo_proto::encode_send(w, kind::FORWARD, &s);
            }
            Err(Failure::NoHandler(m)) => (Status::NoService, m),
            Err(Failure::Handler(m)) => (Status::ServiceError, m),
        };
        let r =
            Return { trans_id: req.trans_id, status: status.code(), response_info: b"", response: message.as_bytes() };
        cumulo_proto::encode_return(w, kind::RETURN, &r);
    }
}
