//! One WebSocket connection, from the 101 to its close. One task drives it:
//! it reads frames (with the idle timeout), turns messages into requests,
//! takes the requests sent to the connection's names (pushes), pings, and
//! writes what is queued in `Outgoing`. Every way out sends the browser a
//! close code that says why, tells the disconnect service, and removes the
//! connection's instance (so its names stop being routed at once).

use super::gate::Gate;
use super::outgoing::Outgoing;
use super::protocol;
use super::settings::{PathSettings, Protocol};
use super::table::{add, CloseReason, Entry, Table};
use super::UniqueNames;
use bytes::Bytes;
use cumulo_proto::{info, Status};
use cumulo_service::{Request as _, SendOptions, ServiceApi};
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{sleep, Instant};
use tokio_tungstenite::tungstenite::error::{CapacityError, Error as WsError};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

/// Time allowed to write the close frame to a browser before the socket is
/// dropped anyway.
const CLOSE_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// Extra time past `timeout_ms` before a call stops waiting on its own (the
/// core answers by the deadline; this only guarantees no call hangs).
const SAFETY_MARGIN: Duration = Duration::from_secs(1);
/// Bytes read from the socket at most per read, 4 KiB. tungstenite zeroes
/// this much of its read buffer before every read (also one that finds
/// nothing, as on every push to the connection), and keeps it per
/// connection: its default, 128 KiB, cost more CPU than the framing and
/// 1.3 GB of memory at 10,000 connections. Larger messages still arrive
/// whole (the buffer grows to a frame's length), in more reads.
const READ_CHUNK: usize = 4 * 1024;
/// Runtime rounds a write may wait, at most, for the answers of calls in
/// flight on its connection to join it (one send for a burst of answers
/// instead of one each). A round is one pass of the core's tasks: a few
/// microseconds when it is idle, longer under load, where batching pays
/// (a cap in time as well, 1 ms, halved the batches under load). 32, not
/// 8: a call to a service process often needs more than 8 rounds, and
/// each answer then went out in a write of its own (bench/websocket,
/// gateway → Rust SDK echo, 64 connections × 8 pipelined: 193–201k → 232–263k
/// messages/s; at low load, 1 connection × 8: 27–34k → 37–38k, with less of
/// the core's CPU per message; 64 rounds measured the same as 32).
const HOLD_ROUNDS: u32 = 32;

pub struct Session<A> {
    pub api: Rc<A>,
    pub cfg: Rc<PathSettings>,
    pub entry: Rc<Entry>,
    pub table: Rc<Table>,
    /// request_info of every message in: the upgrade's headers and the
    /// gateway's keys, `websocket_id`, `websocket_name`.
    pub base_info: Rc<[u8]>,
    /// `base_info` with `websocket_frame` = `text`, and = `binary`: made
    /// once, not per message.
    pub text_info: Box<[u8]>,
    pub binary_info: Box<[u8]>,
    pub request_name: String,
    pub name: String,
    pub stopping: CancellationToken,
    pub unique: Rc<UniqueNames<A>>,
}

impl<A: ServiceApi + 'static> Session<A> {
    pub async fn run<S>(self, io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_CHUNK)
            .max_message_size(Some(self.cfg.max_message))
            .max_frame_size(Some(self.cfg.max_frame));
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        let (mut sink, mut stream) = ws.split();
        let out = Outgoing::new(self.cfg.max_pending);
        self.connected(&out).await;
        let why = {
            let writer = write_all(&mut sink, &out, &self.entry, &self.table);
            tokio::pin!(writer);
            self.serve(&mut stream, &out, writer).await
        };
        tracing::debug!("http: websocket {} ({}) closed: {}", self.entry.id, self.name, why.0.name());
        // A browser that closed gets its close answered by tungstenite; the
        // others are told why, unless they are not reading at all.
        if why.0 != CloseReason::SlowReader {
            let close = why.1.map(|(code, reason)| Message::Close(Some(CloseFrame { code, reason: reason.into() })));
            let _ = tokio::time::timeout(CLOSE_WRITE_TIMEOUT, async {
                if let Some(c) = close {
                    let _ = sink.send(c).await;
                }
                let _ = sink.close().await;
            })
            .await;
        }
        self.finish(why.0);
    }

    /// The upgrade never completed: the entry and names go away.
    pub fn end_without_socket(self) {
        self.finish(CloseReason::Client);
    }

    fn finish(self, why: CloseReason) {
        if self.cfg.unique {
            self.unique.release(&self.name, self.entry.id);
        }
        self.table.closed(self.entry.id, why);
        // Its names stop being routed before anyone hears it left.
        let _ = self.api.unsubscribe(&self.name);
        if let Some(to) = &self.cfg.disconnect_name {
            let mut info = self.base_info.to_vec();
            info::push(&mut info, b"websocket_reason", why.name().as_bytes());
            let o = SendOptions { timeout_ms: self.cfg.timeout_ms, priority: 0, wait_for_service: false };
            // Sent without waiting: the answer (if any) has nowhere to go.
            self.api.send_async(to, &info, why.name().as_bytes(), o);
        }
    }

    /// The connect notification: its answer, if not empty, is the first
    /// message the browser gets.
    async fn connected(&self, out: &Outgoing) {
        let Some(to) = &self.cfg.connect_name else { return };
        let o = SendOptions { timeout_ms: self.cfg.timeout_ms, priority: 0, wait_for_service: false };
        let limit = Duration::from_millis(self.cfg.timeout_ms as u64) + SAFETY_MARGIN;
        match tokio::time::timeout(limit, self.api.call(to, &self.base_info, b"", o)).await {
            Ok(a) if a.status == Status::Ok && !a.response.is_empty() => {
                out.push(to_message(a.response, false));
            }
            Ok(a) if a.status == Status::Ok => {}
            Ok(a) => {
                add(&self.table.counters.request_errors, 1);
                tracing::debug!("http: websocket connect notification to '{to}' failed: {}", a.status.name());
            }
            Err(_) => add(&self.table.counters.request_errors, 1),
        }
    }

    /// Until the connection ends: why, and the close frame to send.
    ///
    /// Everything the loop waits on is made once and polled in place (the
    /// idle and ping timers are re-armed only when they fire, the calls run
    /// inside this task), so a message costs no timer, task or waiter of
    /// its own beyond its call's.
    async fn serve<R>(
        &self,
        stream: &mut R,
        out: &Outgoing,
        mut writer: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> (CloseReason, Option<(CloseCode, &'static str)>)
    where
        R: futures_util::Stream<Item = Result<Message, WsError>> + Unpin,
    {
        let idle = Duration::from_millis(self.cfg.idle_timeout_ms);
        let ping_every = Duration::from_millis(self.cfg.ping_ms.max(1));
        let window = match self.cfg.protocol {
            Protocol::None => 1, // answers in the order of the messages
            Protocol::Id => self.cfg.max_in_flight,
        };
        let mut calls = FuturesUnordered::new();
        // The idle timer fires at most once per idle period: a frame only
        // notes its time, and the timer, when it fires early, moves to that
        // time plus the period.
        let mut last_frame = Instant::now();
        let idle_timer = sleep(idle);
        let ping_timer = sleep(ping_every);
        let stopping = self.stopping.cancelled();
        let close_requested = self.entry.close_requested();
        let overflowed = out.overflowed();
        let next_request = self.api.next_request();
        tokio::pin!(idle_timer, ping_timer, stopping, close_requested, overflowed, next_request);
        // The socket's read side, and together what seldom happens (a stop,
        // a close, an overflow, the idle and ping timers), are polled only
        // when woken themselves, not on every push or answer (gate.rs):
        // while a write waits for answers (HOLD_ROUNDS) the task is polled
        // once per round of the event loop.
        let (read_gate, seldom_gate) = (Gate::new(), Gate::new());
        let ping = self.cfg.ping_ms > 0;
        loop {
            out.expecting.set(calls.len());
            tokio::select! {
                biased;
                event = poll_fn(|cx| seldom_gate.poll(cx, |cx| {
                    if stopping.as_mut().poll(cx).is_ready() {
                        Poll::Ready(Seldom::Stopping)
                    } else if let Poll::Ready(why) = close_requested.as_mut().poll(cx) {
                        Poll::Ready(Seldom::CloseRequested(why))
                    } else if overflowed.as_mut().poll(cx).is_ready() {
                        Poll::Ready(Seldom::Overflowed)
                    } else if idle_timer.as_mut().poll(cx).is_ready() {
                        Poll::Ready(Seldom::IdleTimer)
                    } else if ping && ping_timer.as_mut().poll(cx).is_ready() {
                        Poll::Ready(Seldom::PingTimer)
                    } else {
                        Poll::Pending
                    }
                })) => match event {
                    Seldom::Stopping => return (CloseReason::Stopping, Some((CloseCode::Away, "the gateway is stopping"))),
                    Seldom::CloseRequested(why) => {
                        let text = match why {
                            CloseReason::Replaced => "a newer connection took this name",
                            _ => "closed by the operator",
                        };
                        return (why, Some((CloseCode::Normal, text)));
                    }
                    Seldom::Overflowed => return (CloseReason::SlowReader, None),
                    Seldom::IdleTimer => {
                        let deadline = last_frame + idle;
                        if deadline <= Instant::now() {
                            return (CloseReason::Idle, Some((CloseCode::Away, "idle timeout: nothing received within idle_timeout_ms")));
                        }
                        idle_timer.as_mut().reset(deadline);
                    }
                    Seldom::PingTimer => {
                        ping_timer.as_mut().reset(Instant::now() + ping_every);
                        out.push(Message::Ping(Bytes::from_static(b"cumulo")));
                    }
                },
                Some(reply) = calls.next(), if !calls.is_empty() => {
                    if let Some(m) = reply {
                        out.push(m);
                    }
                }
                request = &mut next_request => {
                    next_request.set(self.api.next_request());
                    match request {
                        Some(r) => self.push(r, out),
                        None => return (CloseReason::Stopping, Some((CloseCode::Away, "the core is stopping"))),
                    }
                }
                frame = poll_fn(|cx| read_gate.poll(cx, |cx| stream.poll_next_unpin(cx))), if calls.len() < window => {
                    last_frame = Instant::now();
                    let (body, text) = match frame {
                        Some(Ok(Message::Text(t))) => (Bytes::from(t), true),
                        Some(Ok(Message::Binary(b))) => (b, false),
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                        Some(Ok(Message::Close(_))) | None => return (CloseReason::Client, None),
                        Some(Err(e)) => return read_error(e),
                    };
                    if let Some(call) = self.message_in(body, text, out) {
                        calls.push(call);
                    }
                }
                // After the branches that queue answers and start calls, so
                // that a write sees the calls just started (Outgoing::expecting).
                () = &mut writer => return (CloseReason::SlowReader, None),
            }
        }
    }

    /// A request sent to one of the connection's names: its body goes to
    /// the browser (text if it is UTF-8, unless request_info says
    /// `websocket_frame` = `binary`), and the sender gets an empty OK once
    /// it is queued.
    fn push(&self, mut r: A::Request, out: &Outgoing) {
        add(&self.table.counters.pushes, 1);
        let binary = info::get(r.request_info(), b"websocket_frame") == Some(b"binary");
        // The body moves into the message; only the trans_id is needed after.
        let body = r.take_body();
        if out.push(to_message(body, binary)) {
            self.api.return_(&r, Status::Ok, b"", b"");
        } else {
            let why = format!("the browser of '{}' is not reading (max_pending): cut off", self.name);
            self.api.return_(&r, Status::QueueFull, b"", why.as_bytes());
        }
    }

    /// A message from the browser becomes a request to `request_name`: the
    /// call to run (inside the session's task), whose result is the message
    /// back, if any; None when the message is refused at once.
    fn message_in<'a>(
        &'a self,
        body: Bytes,
        text: bool,
        out: &Outgoing,
    ) -> Option<impl Future<Output = Option<Message>> + 'a> {
        let c = &self.table.counters;
        add(&c.messages_in, 1);
        add(&c.bytes_in, body.len() as u64);
        add(&self.entry.messages_in, 1);
        add(&self.entry.bytes_in, body.len() as u64);
        let base: &[u8] = if text { &self.text_info } else { &self.binary_info };
        let (info, id) = match self.cfg.protocol {
            Protocol::None => (None, None),
            Protocol::Id => match protocol::request_id(&body) {
                Ok(id) => {
                    let mut info = base.to_vec();
                    info::push(&mut info, b"websocket_request_id", id.as_json().as_bytes());
                    (Some(info), Some(id))
                }
                Err(why) => {
                    out.push(Message::text(protocol::refused(&why)));
                    return None;
                }
            },
        };
        let o = SendOptions { timeout_ms: self.cfg.timeout_ms, priority: 0, wait_for_service: false };
        Some(async move {
            let name = &self.request_name;
            let limit = Duration::from_millis(o.timeout_ms as u64) + SAFETY_MARGIN;
            let info = info.as_deref().unwrap_or(base);
            let (status, response) = match tokio::time::timeout(limit, self.api.call(name, info, &body, o)).await {
                Ok(a) => (a.status, a.response),
                Err(_) => (Status::Timeout, format!("no answer from '{name}' in time").into_bytes()),
            };
            if status != Status::Ok {
                add(&self.table.counters.request_errors, 1);
                tracing::debug!("http: websocket {} request to '{name}' failed: {}", self.entry.id, status.name());
            }
            match id {
                Some(id) => Some(Message::text(protocol::answer(&id, status, &response))),
                None if status == Status::Ok && !response.is_empty() => Some(to_message(response, !text)),
                None => None,
            }
        })
    }
}

/// Writes what is queued, a batch per flush, until the queue overflows (a
/// slow reader) or the socket fails; counts what leaves.
async fn write_all<W>(sink: &mut W, out: &Outgoing, entry: &Entry, table: &Table)
where
    W: futures_util::Sink<Message, Error = WsError> + Unpin,
{
    while let Some(m) = out.next().await {
        let mut batch = Some(m);
        let mut rounds = 0;
        loop {
            while let Some(m) = batch.take().or_else(|| out.try_next()) {
                if !matches!(m, Message::Ping(_)) {
                    let n = m.len() as u64;
                    add(&table.counters.messages_out, 1);
                    add(&table.counters.bytes_out, n);
                    add(&entry.messages_out, 1);
                    add(&entry.bytes_out, n);
                }
                if sink.feed(m).await.is_err() {
                    return std::future::pending().await; // the reader sees the end
                }
            }
            // Calls in flight on this connection (the next pipelined
            // message's, most often): their answers join this write if they
            // come within a few rounds; a push alone is written at once.
            if out.expecting.get() == 0 || rounds == HOLD_ROUNDS {
                break;
            }
            rounds += 1;
            tokio::task::yield_now().await;
        }
        if sink.flush().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// The close code for a read that failed.
fn read_error(e: WsError) -> (CloseReason, Option<(CloseCode, &'static str)>) {
    match e {
        WsError::Capacity(CapacityError::MessageTooLong { .. }) => {
            (CloseReason::TooLarge, Some((CloseCode::Size, "message or frame over the size limit")))
        }
        WsError::Protocol(_) => (CloseReason::Protocol, Some((CloseCode::Protocol, "protocol error"))),
        WsError::Utf8(_) => (CloseReason::Protocol, Some((CloseCode::Invalid, "text message is not UTF-8"))),
        _ => (CloseReason::Client, None),
    }
}

/// What seldom wakes a session, polled behind one gate.
enum Seldom {
    Stopping,
    CloseRequested(CloseReason),
    Overflowed,
    IdleTimer,
    PingTimer,
}

/// Text when it is UTF-8 (and not asked for binary), else binary.
fn to_message(body: Vec<u8>, binary: bool) -> Message {
    if binary {
        return Message::binary(body);
    }
    match String::from_utf8(body) {
        Ok(s) => Message::text(s),
        Err(e) => Message::binary(e.into_bytes()),
    }
}
