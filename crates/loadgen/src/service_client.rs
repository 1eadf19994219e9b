//! Sends service requests to a running core (or the relay) as unmanaged
//! instances, speaking the wire protocol directly with tokio: one connection
//! per lane, any number of requests in flight on each (SEND_ASYNC, answers
//! matched by trans_id), which a blocking SDK instance could not do.
//!
//! Each connection has three tasks on the caller's LocalSet: the sender
//! (paced by the schedule), a writer (everything sent in one turn of the
//! event loop leaves in one write) and a reader (answers, PINGs).

use super::answer::{excerpt, judge, RequestSpec};
use super::recorder::{Outcome, SharedRecorder};
use super::schedule::{latency_origin, Due, Pacer, Schedule};
use ahash::AHashMap;
use anyhow::{anyhow, bail, Context};
use cumulo_proto::{decode, kind, next_frame_len, Frame, Hello, Send, Status, TransId, TransIdGen};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};

type Reader = Box<dyn AsyncRead + Unpin>;
type Writer = Box<dyn AsyncWrite + Unpin>;

/// One unmanaged instance, after its handshake.
pub struct Connection {
    reader: Reader,
    writer: Writer,
    ids: TransIdGen,
    max_frame: u32,
    rbuf: Vec<u8>,
}

/// Connects to a socket path or `tcp://host:port` and says HELLO.
pub async fn connect(socket: &str, prefix: &str) -> anyhow::Result<Connection> {
    let (reader, writer): (Reader, Writer) = match socket.strip_prefix("tcp://") {
        Some(hostport) => {
            let s = tokio::net::TcpStream::connect(hostport)
                .await
                .with_context(|| format!("cannot connect to {socket}"))?;
            s.set_nodelay(true)?;
            let (r, w) = s.into_split();
            (Box::new(r), Box::new(w))
        }
        None => {
            let s =
                tokio::net::UnixStream::connect(socket).await.with_context(|| format!("cannot connect to {socket}"))?;
            let (r, w) = s.into_split();
            (Box::new(r), Box::new(w))
        }
    };
    let mut c = Connection {
        reader,
        writer,
        ids: TransIdGen::new(0, 0),
        max_frame: 1 << 20,
        rbuf: Vec::with_capacity(64 * 1024),
    };
    let mut hello = Vec::new();
    cumulo_proto::encode_hello(
        &mut hello,
        &Hello { version: cumulo_proto::VERSION, window: 1, thread_index: 0, token: "", prefix },
    );
    c.writer.write_all(&hello).await?;
    let frame = tokio::time::timeout(Duration::from_secs(10), c.read_frame())
        .await
        .map_err(|_| anyhow!("{socket}: no WELCOME within 10 s"))??;
    match decode(&frame).map_err(|e| anyhow!("{socket}: {e}"))? {
        Frame::Welcome(w) => {
            c.ids = TransIdGen::new(w.node_id, w.instance_id);
            c.max_frame = w.max_frame.saturating_add(cumulo_proto::REQUEST_OVERHEAD);
        }
        Frame::Error(e) => bail!("{socket} refused the connection: {}: {}", Status::from_code(e.status), e.message),
        other => bail!("{socket}: expected WELCOME, got {}", other.type_name()),
    }
    Ok(c)
}

impl Connection {
    /// Reads one whole frame: its type byte and body.
    async fn read_frame(&mut self) -> anyhow::Result<Vec<u8>> {
        loop {
            if let Some(n) = next_frame_len(&self.rbuf, self.max_frame)? {
                let f = self.rbuf[cumulo_proto::LEN_PREFIX..n].to_vec();
                self.rbuf.drain(..n);
                return Ok(f);
            }
            if self.read_more().await? == 0 {
                bail!("the connection was closed");
            }
        }
    }

    async fn read_more(&mut self) -> std::io::Result<usize> {
        let len = self.rbuf.len();
        if self.rbuf.capacity() - len < 16 * 1024 {
            self.rbuf.reserve(64 * 1024);
        }
        self.rbuf.resize(self.rbuf.capacity(), 0);
        let n = self.reader.read(&mut self.rbuf[len..]).await;
        self.rbuf.truncate(len + *n.as_ref().unwrap_or(&0));
        n
    }

    /// One request, waiting for its answer: used to wait until the service
    /// is there before the run, and to check the answer is the expected one.
    pub async fn probe(&mut self, spec: &RequestSpec, wait: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + wait;
        loop {
            let tid = self.ids.next();
            let mut out = Vec::new();
            encode_send(&mut out, tid, spec);
            self.writer.write_all(&out).await?;
            let (status, body) = loop {
                let f = self.read_frame().await?;
                match decode(&f)? {
                    Frame::Response(r) if r.trans_id == tid => {
                        break (Status::from_code(r.status), r.response.to_vec())
                    }
                    Frame::Ping(n) => {
                        let mut pong = Vec::new();
                        cumulo_proto::encode_ping(&mut pong, kind::PONG, n);
                        self.writer.write_all(&pong).await?;
                    }
                    Frame::Error(e) => {
                        bail!("the core closed the connection: {}: {}", Status::from_code(e.status), e.message)
                    }
                    _ => {}
                }
            };
            match judge(status, &body, spec.check.as_deref()) {
                Outcome::Ok => return Ok(()),
                _ if status == Status::NoService && Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Outcome::Error { why, .. } => bail!("a first request to {} failed: {why}", spec.name),
                Outcome::Timeout => bail!("a first request to {} timed out: {}", spec.name, excerpt(&body)),
            }
        }
    }
}

fn encode_send(out: &mut Vec<u8>, tid: TransId, spec: &RequestSpec) {
    cumulo_proto::encode_send(
        out,
        kind::SEND_ASYNC,
        &Send {
            trans_id: tid,
            timeout: spec.timeout_ms,
            priority: 0,
            flags: 0,
            name: &spec.name,
            request_info: &spec.request_info,
            request: &spec.request,
        },
    );
}

/// Frames waiting to be written, and the writer's wake-up.
#[derive(Default)]
struct Outbox {
    buf: RefCell<Vec<u8>>,
    wake: Notify,
    closed: Cell<bool>,
}

impl Outbox {
    fn push(&self, write: impl FnOnce(&mut Vec<u8>)) {
        let mut b = self.buf.borrow_mut();
        let was_empty = b.is_empty();
        write(&mut b);
        if was_empty {
            self.wake.notify_one();
        }
    }
}

/// A lane's requests in flight: trans_id → where its latency counts from.
struct InFlight {
    map: RefCell<AHashMap<TransId, Instant>>,
    freed: Notify,
}

/// Runs one lane until the pace stops and its answers are in (or the
/// connection ends). Call on a LocalSet.
pub async fn run_lane(
    conn: Connection,
    spec: Rc<RequestSpec>,
    lane: usize,
    lanes: usize,
    pace: watch::Receiver<Schedule>,
    rec: SharedRecorder,
    inflight_max: usize,
) {
    let Connection { reader, writer, ids, max_frame, rbuf } = conn;
    let out = Rc::new(Outbox::default());
    let inflight = Rc::new(InFlight { map: RefCell::new(AHashMap::new()), freed: Notify::new() });
    let writer_task = tokio::task::spawn_local(write_loop(writer, out.clone()));
    let reader_task = tokio::task::spawn_local(read_loop(
        reader,
        rbuf,
        max_frame,
        out.clone(),
        inflight.clone(),
        spec.clone(),
        rec.clone(),
    ));
    send_loop(ids, &spec, Pacer::new(lane, lanes, pace), &out, &inflight, &rec, inflight_max.max(1)).await;
    // The answers still due arrive, or the caller gives up waiting for them.
    let _ = reader_task.await;
    out.closed.set(true);
    out.wake.notify_one();
    let _ = writer_task.await;
}

async fn send_loop(
    mut ids: TransIdGen,
    spec: &RequestSpec,
    mut pacer: Pacer,
    out: &Outbox,
    inflight: &InFlight,
    rec: &SharedRecorder,
    cap: usize,
) {
    let timeout = Duration::from_millis(if spec.timeout_ms == 0 { 5_000 } else { spec.timeout_ms as u64 });
    'next: loop {
        if out.closed.get() {
            return;
        }
        let due = match pacer.next().await {
            Due::Stop => return,
            Due::At(t) => Some(t),
            Due::Now => None,
        };
        // Full: wait for a free slot; a request that cannot leave within
        // its timeout is counted as timed out and never sent.
        while inflight.map.borrow().len() >= pacer.inflight_cap(cap) {
            let give_up = due.unwrap_or_else(Instant::now) + timeout;
            tokio::select! {
                _ = inflight.freed.notified() => {}
                _ = tokio::time::sleep_until(give_up.into()) => {
                    if due.is_some() && inflight.map.borrow().len() >= pacer.inflight_cap(cap) {
                        rec.lock().dropped();
                        continue 'next;
                    }
                }
            }
            if out.closed.get() {
                return;
            }
        }
        let now = Instant::now();
        let origin = due.map_or(now, |d| latency_origin(d, now));
        let tid = ids.next();
        inflight.map.borrow_mut().insert(tid, origin);
        rec.lock().sent();
        out.push(|b| encode_send(b, tid, spec));
    }
}

async fn write_loop(mut w: Writer, out: Rc<Outbox>) {
    let mut batch = Vec::with_capacity(64 * 1024);
    loop {
        {
            let mut b = out.buf.borrow_mut();
            if b.is_empty() {
                if out.closed.get() {
                    return;
                }
            } else {
                std::mem::swap(&mut *b, &mut batch);
            }
        }
        if batch.is_empty() {
            out.wake.notified().await;
            continue;
        }
        if w.write_all(&batch).await.is_err() {
            out.closed.set(true);
            return;
        }
        batch.clear();
    }
}

async fn read_loop(
    mut r: Reader,
    mut buf: Vec<u8>,
    max_frame: u32,
    out: Rc<Outbox>,
    inflight: Rc<InFlight>,
    spec: Rc<RequestSpec>,
    rec: SharedRecorder,
) {
    let closed_why = 'read: loop {
        // Every whole frame in the buffer, then read more.
        let mut start = 0;
        loop {
            let n = match next_frame_len(&buf[start..], max_frame) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => break 'read format!("bad frame from the core: {e}"),
            };
            let frame = &buf[start + cumulo_proto::LEN_PREFIX..start + n];
            start += n;
            match decode(frame) {
                Ok(Frame::Response(resp)) => {
                    let Some(origin) = inflight.map.borrow_mut().remove(&resp.trans_id) else { continue };
                    let us = origin.elapsed().as_micros() as u64;
                    let outcome = judge(Status::from_code(resp.status), resp.response, spec.check.as_deref());
                    rec.lock().done(us, &outcome);
                    inflight.freed.notify_one();
                }
                Ok(Frame::Ping(n)) => out.push(|b| cumulo_proto::encode_ping(b, kind::PONG, n)),
                Ok(Frame::Terminate(_)) => break 'read "the core is shutting down".to_string(),
                Ok(Frame::Error(e)) => {
                    break 'read format!(
                        "the core closed the connection: {}: {}",
                        Status::from_code(e.status),
                        e.message
                    )
                }
                Ok(_) => {}
                Err(e) => break 'read format!("bad frame from the core: {e}"),
            }
        }
        buf.drain(..start);
        let len = buf.len();
        if buf.capacity() - len < 16 * 1024 {
            buf.reserve(64 * 1024);
        }
        buf.resize(buf.capacity(), 0);
        match r.read(&mut buf[len..]).await {
            Ok(0) => break "the connection was closed".to_string(),
            Ok(n) => buf.truncate(len + n),
            Err(e) => break format!("read failed: {e}"),
        }
    };
    // Whatever was in flight on this connection will never be answered.
    let lost: Vec<Instant> = inflight.map.borrow_mut().drain().map(|(_, o)| o).collect();
    {
        let mut g = rec.lock();
        for origin in lost {
            g.done(origin.elapsed().as_micros() as u64, &Outcome::error("connection", closed_why.clone()));
        }
    }
    out.closed.set(true);
    out.wake.notify_one();
    inflight.freed.notify_waiters();
}
