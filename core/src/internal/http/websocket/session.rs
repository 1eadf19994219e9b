//! One WebSocket connection, from the 101 to its close. One task drives it:
//! it reads frames (with the idle timeout), turns messages into requests,
//! takes the requests sent to the connection's names (pushes), pings, and
//! writes what is queued in `Outgoing`. Every way out sends the browser a
//! close code that says why, tells the disconnect service, and removes the
//! connection's instance (so its names stop being routed at once).

use super::outgoing::Outgoing;
use super::protocol;
use super::settings::{PathSettings, Protocol};
use super::table::{add, CloseReason, Entry, Table};
use super::UniqueNames;
use crate::instance::OwnedRequest;
use crate::internal::api::SendOptions;
use crate::internal::InternalApi;
use cumulo_proto::{info, Status};
use futures_util::{SinkExt, StreamExt};
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};
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

pub struct Session {
    pub api: Rc<InternalApi>,
    pub cfg: Rc<PathSettings>,
    pub entry: Rc<Entry>,
    pub table: Rc<Table>,
    /// request_info of every message in: the upgrade's headers and the
    /// gateway's keys, `websocket_id`, `websocket_name`.
    pub base_info: Rc<[u8]>,
    pub request_name: String,
    pub name: String,
    pub stopping: CancellationToken,
    pub unique: Rc<UniqueNames>,
}

impl Session {
    pub async fn run<S>(self, io: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + 'static,
    {
        let config = WebSocketConfig::default()
            .max_message_size(Some(self.cfg.max_message))
            .max_frame_size(Some(self.cfg.max_frame));
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        let (mut sink, mut stream) = ws.split();
        let out = Rc::new(Outgoing::new(self.cfg.max_pending));
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
        match tokio::time::timeout(limit, self.api.send_sync(to, &self.base_info, b"", o)).await {
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
    async fn serve<R>(
        &self,
        stream: &mut R,
        out: &Rc<Outgoing>,
        mut writer: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> (CloseReason, Option<(CloseCode, &'static str)>)
    where
        R: futures_util::Stream<Item = Result<Message, WsError>> + Unpin,
    {
        let idle = Duration::from_millis(self.cfg.idle_timeout_ms);
        let mut idle_deadline = Instant::now() + idle;
        let ping_every = Duration::from_millis(self.cfg.ping_ms.max(1));
        let mut next_ping = Instant::now() + ping_every;
        let window = match self.cfg.protocol {
            Protocol::None => 1, // answers in the order of the messages
            Protocol::Id => self.cfg.max_in_flight,
        };
        let mut calls: JoinSet<()> = JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = self.stopping.cancelled() => return (CloseReason::Stopping, Some((CloseCode::Away, "the gateway is stopping"))),
                why = self.entry.close_requested() => {
                    let text = match why {
                        CloseReason::Replaced => "a newer connection took this name",
                        _ => "closed by the operator",
                    };
                    return (why, Some((CloseCode::Normal, text)));
                }
                () = &mut writer => return (CloseReason::SlowReader, None),
                () = out.overflowed() => return (CloseReason::SlowReader, None),
                Some(_) = calls.join_next(), if !calls.is_empty() => {}
                request = self.api.next_request() => match request {
                    Some(r) => self.push(r, out),
                    None => return (CloseReason::Stopping, Some((CloseCode::Away, "the core is stopping"))),
                },
                frame = stream.next(), if calls.len() < window => {
                    idle_deadline = Instant::now() + idle;
                    match frame {
                        Some(Ok(Message::Text(t))) => self.message_in(t.as_bytes().to_vec(), true, out, &mut calls),
                        Some(Ok(Message::Binary(b))) => self.message_in(b.to_vec(), false, out, &mut calls),
                        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                        Some(Ok(Message::Close(_))) | None => return (CloseReason::Client, None),
                        Some(Err(e)) => return read_error(e),
                    }
                }
                () = sleep_until(idle_deadline) => {
                    return (CloseReason::Idle, Some((CloseCode::Away, "idle timeout: nothing received within idle_timeout_ms")));
                }
                () = sleep_until(next_ping), if self.cfg.ping_ms > 0 => {
                    next_ping = Instant::now() + ping_every;
                    out.push(Message::Ping(bytes::Bytes::from_static(b"cumulo")));
                }
            }
        }
    }

    /// A request sent to one of the connection's names: its body goes to
    /// the browser (text if it is UTF-8, unless request_info says
    /// `websocket_frame` = `binary`), and the sender gets an empty OK once
    /// it is queued.
    fn push(&self, r: OwnedRequest, out: &Outgoing) {
        add(&self.table.counters.pushes, 1);
        let binary = info::get(&r.request_info, b"websocket_frame") == Some(b"binary");
        if out.push(to_message(r.request.to_vec(), binary)) {
            self.api.return_(&r, Status::Ok, b"", b"");
        } else {
            let why = format!("the browser of '{}' is not reading (max_pending): cut off", self.name);
            self.api.return_(&r, Status::QueueFull, b"", why.as_bytes());
        }
    }

    /// A message from the browser becomes a request to `request_name`.
    fn message_in(&self, body: Vec<u8>, text: bool, out: &Rc<Outgoing>, calls: &mut JoinSet<()>) {
        let c = &self.table.counters;
        add(&c.messages_in, 1);
        add(&c.bytes_in, body.len() as u64);
        add(&self.entry.messages_in, 1);
        add(&self.entry.bytes_in, body.len() as u64);
        let mut info = self.base_info.to_vec();
        info::push(&mut info, b"websocket_frame", if text { b"text" } else { b"binary" });
        let id = match self.cfg.protocol {
            Protocol::None => None,
            Protocol::Id => match protocol::request_id(&body) {
                Ok(id) => {
                    info::push(&mut info, b"websocket_request_id", id.to_string().as_bytes());
                    Some(id)
                }
                Err(why) => {
                    out.push(Message::text(protocol::refused(&why)));
                    return;
                }
            },
        };
        let (api, out, table, entry) = (self.api.clone(), out.clone(), self.table.clone(), self.entry.clone());
        let name = self.request_name.clone();
        let o = SendOptions { timeout_ms: self.cfg.timeout_ms, priority: 0, wait_for_service: false };
        calls.spawn_local(async move {
            let limit = Duration::from_millis(o.timeout_ms as u64) + SAFETY_MARGIN;
            let (status, response) = match tokio::time::timeout(limit, api.send_sync(&name, &info, &body, o)).await {
                Ok(a) => (a.status, a.response),
                Err(_) => (Status::Timeout, format!("no answer from '{name}' in time").into_bytes()),
            };
            if status != Status::Ok {
                add(&table.counters.request_errors, 1);
                tracing::debug!("http: websocket {} request to '{name}' failed: {}", entry.id, status.name());
            }
            let reply = match id {
                Some(id) => Some(Message::text(protocol::answer(&id, status, &response))),
                None if status == Status::Ok && !response.is_empty() => Some(to_message(response, !text)),
                None => None,
            };
            if let Some(m) = reply {
                out.push(m);
            }
        });
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
