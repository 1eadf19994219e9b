//! Requests from this instance: send_async, send_sync, mcast_async and
//! collecting their answers with recv_async.

use crate::api::{Api, Response, SendOptions};
use crate::error::{Error, Result};
use cumulo_proto::{kind, Frame, Send, Status, TransId, SEND_WAIT_FOR_SERVICE};
use std::time::{Duration, Instant};

/// How long past a request's own timeout a wait for its RESPONSE goes on,
/// seconds: the core always answers (TIMEOUT at the latest), so this only
/// guards against a core that stopped answering altogether.
const CORE_ANSWER_GRACE: Duration = Duration::from_secs(5);

impl Api {
    /// Queues a send; a frame over the core's limit is not queued and its
    /// TOO_LARGE error is returned instead.
    fn send_frame(&mut self, ty: u8, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> (TransId, Result<()>) {
        let tid = self.ids.next();
        let flags = if o.wait_for_service { SEND_WAIT_FOR_SERVICE } else { 0 };
        let timeout = self.nested_timeout(ty, o.timeout);
        let priority = if o.priority == 0 && !o.exact_priority { self.priority_default } else { o.priority };
        let info = self.trace.apply(info);
        let s = Send { trans_id: tid, timeout, priority, flags, name, request_info: info, request: body };
        let start = self.conn.wbuf.len();
        cumulo_proto::encode_send(&mut self.conn.wbuf, ty, &s);
        (tid, self.within_limit(start))
    }

    /// Takes back the frame queued from `start` if it is over the core's
    /// limit (the core would answer ERROR TOO_LARGE and close the connection).
    pub(crate) fn within_limit(&mut self, start: usize) -> Result<()> {
        let len = self.conn.wbuf.len() - start - cumulo_proto::LEN_PREFIX;
        if len <= self.send_limit {
            return Ok(());
        }
        self.conn.wbuf.truncate(start);
        Err(Error::Status {
            status: Status::TooLarge,
            message: format!(
                "a frame of {len} bytes is over the core's limit of {} bytes (core.max_frame)",
                self.send_limit
            ),
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
    /// The frame is written at the next flush (any wait, `flush`, or
    /// closing). A request too large for the core is not sent: its answer is
    /// a TOO_LARGE error, there at once.
    pub fn send_async(&mut self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> TransId {
        let (tid, queued) = self.send_frame(kind::SEND_ASYNC, name, info, body, o);
        match queued {
            Ok(()) => _ = self.inbox.awaited.insert(tid),
            Err(e) => self.inbox.responses.push_back((tid, Err(e))),
        }
        tid
    }

    /// Sends and waits for the answer.
    pub fn send_sync(&mut self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Result<Response> {
        let (tid, queued) = self.send_frame(kind::SEND_SYNC, name, info, body, o);
        queued?;
        self.inbox.awaited.insert(tid);
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
                ids = Some(m.ids().collect::<Vec<TransId>>());
                true
            }
            _ => false,
        })?;
        let ids = ids.unwrap();
        // The copies' answers come after MCAST_SENT (the core writes it first).
        self.inbox.awaited.extend(ids.iter().copied());
        Ok(ids)
    }

    /// The answer to an async send: of `tid`, or of whichever arrives next.
    /// `Ok(None)` if nothing arrived within `wait`.
    pub fn recv_async(&mut self, tid: Option<TransId>, wait: Duration) -> Result<Option<(TransId, Result<Response>)>> {
        let deadline = Instant::now() + wait;
        loop {
            let responses = &mut self.inbox.responses;
            let pos = match tid {
                Some(t) => responses.iter().position(|(x, _)| *x == t),
                None => (!responses.is_empty()).then_some(0),
            };
            if let Some(p) = pos {
                return Ok(responses.remove(p));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.read_one(Some(left))? {
                return Ok(None);
            }
        }
    }

    fn await_response(&mut self, tid: TransId, timeout_ms: u32) -> Result<Response> {
        let guard = Duration::from_millis(timeout_ms as u64) + CORE_ANSWER_GRACE;
        let answer = self.recv_async(Some(tid), guard);
        if !matches!(answer, Ok(Some(_))) {
            // Given up: an answer arriving later is dropped, not kept.
            self.inbox.awaited.remove(&tid);
        }
        match answer? {
            Some((_, r)) => r,
            None => Err(Error::Status { status: Status::Timeout, message: "the core did not answer".into() }),
        }
    }
}
