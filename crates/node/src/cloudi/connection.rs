//! One CloudI API thread's socket, adapted to the core.
//!
//! The connection is an instance like any other (window 1, admitted by its
//! process's token): what the API sends is turned into the frames a native
//! SDK would send and handed to `Core::handle_frame`; what the core writes
//! for it (native frames in its `Outbox`) is turned into CloudI messages.
//! What CloudI keeps in the core and a native SDK keeps itself lives here:
//! trans_id generation, the responses of `send_async` until `recv_async`
//! collects them (at most until their request's deadline, as CloudI, and
//! within `max_outbox` bytes), and holding requests back until the API is
//! polling.

use super::messages::{self as msg, ApiMessage, ApiSend};
use cumulo_proto::{Frame, Status, TransId, TransIdGen};
use cumulo_router::InstanceId;
use cumulo_router::Shared;
use cumulo_router::{Endpoint, Outbox};
use cumulo_sys::Throttle;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

// The listener's read buffer, read size and close grace: the same bounds as
// a native connection.
use crate::listener::{ReadBuf, CLOSE_GRACE, READ_CHUNK};
/// Failed async trans_ids remembered so that `recv_async` on one answers at
/// once instead of waiting out its timeout; older ones are forgotten.
const FAILED_REMEMBERED: usize = 1024;
/// How often kept responses are swept for expired ones (recv_async never
/// hands out an expired one in between).
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// req_ids of the control frames this adapter sends (it has one of each in
/// flight at most: the API waits for subscribe_count's answer).
const REQ_SUBSCRIBE: u32 = 1;
const REQ_UNSUBSCRIBE: u32 = 2;
const REQ_SUBSCRIBE_COUNT: u32 = 3;

/// What the API is blocked on, waiting for the core's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Waiting {
    Nothing,
    Sync(TransId),
    Mcast(TransId),
    Count,
    Recv { trans_id: TransId, consume: bool, deadline: Instant },
}

struct Adapter {
    id: InstanceId,
    label: String,
    ids: TransIdGen,
    /// The API sent `polling`: it may get requests.
    polling: bool,
    waiting: Waiting,
    /// CloudI request messages not yet given to the API (it is not polling,
    /// or waits for an answer of its own).
    held: Vec<u8>,
    /// Responses of send_async and mcast_async copies, until recv_async
    /// takes them or their request's deadline passes.
    responses: VecDeque<Kept>,
    /// Bytes of response_info and response in `responses`, at most
    /// `max_kept` (core.max_outbox): the oldest go first beyond it.
    kept_bytes: usize,
    max_kept: usize,
    next_sweep: Instant,
    dropped: Throttle,
    /// Async sends (and mcast copies) in flight: until when their answers
    /// are kept. Every accepted send gets a RESPONSE, which removes its entry.
    deadlines: HashMap<TransId, Instant>,
    /// The deadline of the mcast_async in flight, for its copies.
    mcast_deadline: Instant,
    /// The service's timeout_async: the timeout of a send that gives none.
    timeout_async: u32,
    failed: VecDeque<TransId>,
    /// CloudI bytes for the API's socket, not written yet. Written by this
    /// task itself (no writer task: one wake-up less per message).
    out: Vec<u8>,
    /// Where in `out` the message being written ends: one message per
    /// write, as CloudI's core sends them.
    msg_end: usize,
    /// The core's keep-alive round came: answered for the API.
    pinged: bool,
}

/// A response kept for recv_async.
struct Kept {
    trans_id: TransId,
    info: Vec<u8>,
    body: Vec<u8>,
    until: Instant,
}

/// Runs one thread's connection of a CloudI-protocol process until either
/// side closes it. `token` and `thread_index` identify it to the core as a
/// native HELLO would.
pub async fn run(core: Shared, stream: UnixStream, token: Rc<str>, thread_index: u32, service: Rc<str>) {
    let rx_fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let (mut rd, wr) = stream.into_split();
    let (max_frame, max_outbox) = {
        let c = core.borrow();
        (c.limits().max_frame as usize, c.limits().max_outbox)
    };
    let mut rb = ReadBuf { buf: Vec::with_capacity(READ_CHUNK), start: 0 };
    // The API speaks first: `init`. A process that never does is killed by
    // the supervisor at timeout_init, which closes this socket.
    let first = loop {
        match next_message(&rb.buf[rb.start..], max_frame) {
            Ok(Some(n)) => break n,
            Ok(None) => {}
            Err(e) => return malformed(&core, &token, &service, thread_index, &e),
        }
        let want = wanted(&rb.buf[rb.start..]);
        match rb.fill(&mut rd, want).await {
            Ok(true) => {}
            _ => return,
        }
    };
    match msg::decode(&rb.buf[rb.start + msg::LEN_PREFIX..rb.start + first]) {
        Ok(ApiMessage::Init) => {}
        Ok(other) => {
            let why = format!("expected init first, got {}", other.name());
            return malformed(&core, &token, &service, thread_index, &why);
        }
        Err(e) => return malformed(&core, &token, &service, thread_index, &e),
    }
    rb.start += first;

    let native = Outbox::new(max_outbox);
    let mut out = Vec::with_capacity(READ_CHUNK);
    let admitted = {
        let mut c = core.borrow_mut();
        let node_id = c.limits().node_id;
        c.admit(&token, "", thread_index, 1, Endpoint::Socket(native.clone())).map(|a| {
            msg::encode_init(
                &mut out,
                &msg::Init {
                    process_index: a.process_index,
                    process_count: a.process_count,
                    prefix: &a.prefix,
                    timeout_initialize: a.options.timeout_init,
                    timeout_async: a.options.timeout_async,
                    timeout_sync: a.options.timeout_sync,
                    timeout_terminate: a.options.timeout_terminate,
                    priority_default: a.options.priority_default,
                },
            );
            c.connection_task_started();
            if let Some(inst) = c.instance_mut(&a.id) {
                inst.set_rx_fd(Some(rx_fd)); // for the keep-alive check
                inst.mark_cloudi();
            }
            let label = c.instance(&a.id).map_or_else(String::new, |i| i.label().to_string());
            (a.id, TransIdGen::new(node_id, a.id), label, a.options.timeout_async)
        })
    };
    let (id, ids, label, timeout_async) = match admitted {
        Ok(v) => v,
        Err(cumulo_router::RouteError { why, .. }) => {
            tracing::warn!(service = %service, "refused a CloudI API thread {thread_index}: {why}");
            return;
        }
    };
    let mut wr = wr;
    let mut a = Adapter::new(id, label, ids, timeout_async, max_outbox, out);
    let why = a.serve(&core, &mut rd, &mut wr, &mut rb, &native, (max_frame, max_outbox)).await;
    if why.starts_with("closed by the peer") {
        tracing::debug!(instance = id, "{}: {why}", a.label);
    } else if why.starts_with("protocol error") {
        tracing::error!(instance = id, "closing {}: {why}", a.label);
    } else {
        tracing::warn!(instance = id, "closing {}: {why}", a.label);
    }
    // The core gave up on this thread, not the process: CloudI kills such a
    // process so that it is restarted (within max_r/max_t). Not one being
    // terminated already (its subscribes are refused meanwhile).
    let retiring = core.borrow().instance(&id).is_some_and(|i| i.retiring());
    if !why.starts_with("closed by") && !retiring {
        kill_process(&core, &token, &service, &why);
    }
    core.borrow_mut().remove_instance(id, &why);
    native.close();
    // What is left (a TERM, say) may take CLOSE_GRACE to leave.
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        let _ = wr.write_all(&a.out).await;
        let _ = wr.shutdown().await;
    })
    .await;
    core.borrow_mut().connection_task_ended();
}

fn put(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) {
    write(out)
}

fn malformed(core: &Shared, token: &str, service: &str, thread_index: u32, why: &str) {
    tracing::error!(service = %service, "CloudI API thread {thread_index} of {service}: {why}; closing its connection");
    kill_process(core, token, service, why);
}

/// Kills the process of a thread whose connection the core closed: a CloudI
/// API does not exit when one of its sockets closes (the Python API spins),
/// and CloudI restarts such a process. The supervisor sees it exit and
/// restarts it within max_r/max_t.
fn kill_process(core: &Shared, token: &str, service: &str, why: &str) {
    let pid = core.borrow().process(token).and_then(|slot| slot.pid);
    if let Some(pid) = pid {
        tracing::warn!(service = %service, "killing CloudI API process {pid}: {why}");
        cumulo_sys::signal(pid, libc::SIGKILL);
    }
}

/// Bytes of the message begun at the start of `data`, prefix included (0
/// until its prefix is here): what the read buffer makes room for.
fn wanted(data: &[u8]) -> usize {
    data.get(..msg::LEN_PREFIX)
        .map_or(0, |p| msg::LEN_PREFIX + u32::from_be_bytes(p.try_into().unwrap_or_default()) as usize)
}

/// The length of the whole message at the start of `data` (prefix
/// included), None if it has not all arrived.
fn next_message(data: &[u8], max: usize) -> Result<Option<usize>, String> {
    let Some(prefix) = data.get(..msg::LEN_PREFIX) else { return Ok(None) };
    let len = u32::from_be_bytes(prefix.try_into().unwrap_or_default()) as usize;
    if len > max {
        return Err(format!("a {len}-byte message is over the {max}-byte limit (core.max_frame)"));
    }
    Ok((data.len() >= msg::LEN_PREFIX + len).then_some(msg::LEN_PREFIX + len))
}

impl Adapter {
    fn new(
        id: InstanceId,
        label: String,
        ids: TransIdGen,
        timeout_async: u32,
        max_kept: usize,
        out: Vec<u8>,
    ) -> Adapter {
        let now = Instant::now();
        Adapter {
            id,
            label,
            ids,
            polling: false,
            waiting: Waiting::Nothing,
            held: Vec::new(),
            responses: VecDeque::new(),
            kept_bytes: 0,
            max_kept,
            next_sweep: now + SWEEP_EVERY,
            dropped: Throttle::default(),
            deadlines: HashMap::new(),
            mcast_deadline: now,
            timeout_async,
            failed: VecDeque::new(),
            out,
            msg_end: 0,
            pinged: false,
        }
    }

    #[allow(clippy::too_many_arguments, reason = "the connection's halves, buffers and limits, each used in the loop")]
    async fn serve(
        &mut self,
        core: &Shared,
        rd: &mut OwnedReadHalf,
        wr: &mut OwnedWriteHalf,
        rb: &mut ReadBuf,
        native: &Rc<Outbox>,
        (max_frame, max_outbox): (usize, usize),
    ) -> String {
        let mut batch = Vec::with_capacity(READ_CHUNK);
        loop {
            // Every whole message read so far, under one borrow of the core.
            {
                let mut c = core.borrow_mut();
                let now = Instant::now();
                c.set_now(now);
                if let Some(inst) = c.instance_mut(&self.id) {
                    inst.heard_from(now);
                }
                loop {
                    let n = match next_message(&rb.buf[rb.start..], max_frame) {
                        Ok(Some(n)) => n,
                        Ok(None) => break,
                        Err(e) => return self.protocol_error(&mut c, &e),
                    };
                    let m = match msg::decode(&rb.buf[rb.start + msg::LEN_PREFIX..rb.start + n]) {
                        Ok(m) => m,
                        Err(e) => return self.protocol_error(&mut c, &e),
                    };
                    if let Err(e) = self.api_message(&mut c, m) {
                        return self.protocol_error(&mut c, &e);
                    }
                    rb.start += n;
                }
            }
            let want = wanted(&rb.buf[rb.start..]);
            let deadline = match self.waiting {
                Waiting::Recv { deadline, .. } => Some(deadline),
                _ => None,
            };
            if let Err(e) = self.flush(wr) {
                return e;
            }
            if self.out.len() > max_outbox {
                return format!("slow consumer: more than {max_outbox} bytes waiting to be read");
            }
            tokio::select! {
                w = wr.writable(), if !self.out.is_empty() => {
                    if let Err(e) = w {
                        return format!("closed by the peer: {e}");
                    }
                }
                r = rb.fill(rd, want) => match r {
                    Ok(true) => {}
                    Ok(false) => return "closed by the peer".into(),
                    Err(e) => return format!("closed by the peer: {e}"),
                },
                more = native.next_batch(&mut batch) => {
                    if !more {
                        return "closed by the core".into();
                    }
                    if let Err(e) = self.core_frames(&batch) {
                        return e;
                    }
                    batch.clear();
                    if std::mem::take(&mut self.pinged) {
                        if let Some(inst) = core.borrow_mut().instance_mut(&self.id) {
                            inst.heard_from(Instant::now());
                        }
                    }
                }
                _ = sleep_until(deadline) => {
                    // recv_async timed out: CloudI answers with the null trans_id.
                    put(&mut self.out, |b| msg::encode_response(b, msg::RECV_ASYNC, b"", b"", &msg::NULL_TRANS_ID));
                    self.waiting = Waiting::Nothing;
                    self.release();
                }
            }
        }
    }

    /// Writes what the socket takes now, without waiting, one message per
    /// write as CloudI's core does: CloudI's JavaScript API handles one
    /// message per socket read and keeps the rest until the next one.
    fn flush(&mut self, wr: &mut OwnedWriteHalf) -> Result<(), String> {
        let mut done = 0;
        while done < self.out.len() {
            if self.msg_end <= done {
                let len = self
                    .out
                    .get(done..done + msg::LEN_PREFIX)
                    .map_or(0, |p| u32::from_be_bytes(p.try_into().unwrap_or_default()) as usize);
                self.msg_end = (done + msg::LEN_PREFIX + len).min(self.out.len());
            }
            match wr.try_write(&self.out[done..self.msg_end]) {
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(format!("closed by the peer: {e}")),
            }
        }
        self.out.drain(..done);
        self.msg_end -= done;
        Ok(())
    }

    fn protocol_error(&self, c: &mut cumulo_router::Core, why: &str) -> String {
        c.count_protocol_error();
        format!("protocol error: {why}")
    }

    /// One message from the API, as the frame a native SDK would send.
    fn api_message(&mut self, c: &mut cumulo_router::Core, m: ApiMessage) -> Result<(), String> {
        let id = self.id;
        let handle = |c: &mut cumulo_router::Core, f: Frame| c.handle_frame(id, f).map_err(|e| e.why);
        match m {
            ApiMessage::Init => return Err("init sent twice".into()),
            ApiMessage::Polling => {
                self.polling = true;
                self.release();
            }
            ApiMessage::Keepalive => {}
            ApiMessage::Subscribe(p) => handle(
                c,
                Frame::Subscribe(cumulo_proto::Control { req_id: REQ_SUBSCRIBE, pattern: utf8(&p, "pattern")? }),
            )?,
            ApiMessage::Unsubscribe(p) => handle(
                c,
                Frame::Unsubscribe(cumulo_proto::Control { req_id: REQ_UNSUBSCRIBE, pattern: utf8(&p, "pattern")? }),
            )?,
            ApiMessage::SubscribeCount(p) => {
                self.wait(Waiting::Count)?;
                handle(
                    c,
                    Frame::SubscribeCount(cumulo_proto::Control {
                        req_id: REQ_SUBSCRIBE_COUNT,
                        pattern: utf8(&p, "pattern")?,
                    }),
                )?
            }
            ApiMessage::SendAsync(s) => {
                let tid = self.ids.next();
                handle(c, Frame::SendAsync(native_send(&s, tid)?))?;
                let until = self.deadline(c.now(), s.timeout);
                self.deadlines.insert(tid, until);
                put(&mut self.out, |b| msg::encode_return_async(b, &tid));
            }
            ApiMessage::SendSync(s) => {
                let tid = self.ids.next();
                self.wait(Waiting::Sync(tid))?;
                handle(c, Frame::SendSync(native_send(&s, tid)?))?;
            }
            ApiMessage::McastAsync(s) => {
                let tid = self.ids.next();
                self.wait(Waiting::Mcast(tid))?;
                handle(c, Frame::McastAsync(native_send(&s, tid)?))?;
                self.mcast_deadline = self.deadline(c.now(), s.timeout);
            }
            ApiMessage::Forward(s, tid) => {
                handle(c, Frame::Forward(native_send(&s, tid)?))?;
            }
            ApiMessage::Return { response_info, response, trans_id } => {
                // CloudI's null response (both empty) means "no answer": the
                // sender times out. Here it learns so at once.
                let null = response_info.is_empty() && response.is_empty();
                let r = cumulo_proto::Return {
                    trans_id,
                    status: if null { Status::Timeout.code() } else { Status::Ok.code() },
                    response_info,
                    response: if null { b"the CloudI service returned a null response" } else { response },
                };
                handle(c, Frame::Return(r))?;
            }
            ApiMessage::RecvAsync { timeout, trans_id, consume } => {
                let deadline = c.now() + Duration::from_millis(timeout as u64);
                self.wait(Waiting::Recv { trans_id, consume, deadline })?;
                self.answer_recv();
            }
            ApiMessage::Shutdown(reason) => {
                tracing::info!(
                    instance = id,
                    "{} asked to shut down: {}",
                    self.label,
                    String::from_utf8_lossy(&reason)
                );
                handle(c, Frame::Goodbye)?;
            }
        }
        Ok(())
    }

    /// When the answer to a send made `now` with `timeout` stops being kept.
    fn deadline(&self, now: Instant, timeout: u32) -> Instant {
        let ms = if timeout == 0 { self.timeout_async } else { timeout };
        now + Duration::from_millis(ms as u64)
    }

    fn wait(&mut self, w: Waiting) -> Result<(), String> {
        if self.waiting != Waiting::Nothing {
            return Err(format!("a new call while the API waits for the answer to another ({:?})", self.waiting));
        }
        self.waiting = w;
        Ok(())
    }

    /// Answers a pending recv_async if a response it wants is here.
    fn answer_recv(&mut self) {
        let Waiting::Recv { trans_id, consume, .. } = self.waiting else { return };
        let any = trans_id == msg::NULL_TRANS_ID;
        let now = Instant::now();
        self.sweep(now);
        // With no trans_id, the oldest request's response (CloudI's
        // recv_async_select_oldest): trans_ids are in time order as bytes.
        let found = if any {
            self.responses
                .iter()
                .enumerate()
                .filter(|(_, k)| k.until > now)
                .min_by_key(|(_, k)| k.trans_id.0)
                .map(|(i, _)| i)
        } else {
            self.responses.iter().position(|k| k.until > now && k.trans_id == trans_id)
        };
        if let Some(i) = found {
            let k = &self.responses[i];
            put(&mut self.out, |b| msg::encode_response(b, msg::RECV_ASYNC, &k.info, &k.body, &k.trans_id));
            if consume {
                if let Some(k) = self.responses.remove(i) {
                    self.kept_bytes -= k.info.len() + k.body.len();
                }
            }
        } else if !any && self.failed.contains(&trans_id) {
            put(&mut self.out, |b| msg::encode_response(b, msg::RECV_ASYNC, b"", b"", &msg::NULL_TRANS_ID));
        } else {
            return;
        }
        self.waiting = Waiting::Nothing;
        self.release();
    }

    /// Keeps a response for recv_async, within `max_kept` bytes.
    fn keep(&mut self, k: Kept) {
        self.sweep(Instant::now());
        self.kept_bytes += k.info.len() + k.body.len();
        self.responses.push_back(k);
        let mut dropped = 0;
        while self.kept_bytes > self.max_kept && self.responses.len() > 1 {
            if let Some(old) = self.responses.pop_front() {
                self.kept_bytes -= old.info.len() + old.body.len();
                dropped += 1;
            }
        }
        if dropped > 0 {
            let (label, max) = (&self.label, self.max_kept);
            self.dropped.warn(|n| {
                format!("{label}: dropped the oldest of its uncollected send_async responses ({n} times): more than {max} bytes waiting for recv_async (core.max_outbox)")
            });
        }
    }

    /// Forgets the kept responses whose request's deadline has passed
    /// (at most once per SWEEP_EVERY).
    fn sweep(&mut self, now: Instant) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_EVERY;
        self.responses.retain(|k| k.until > now);
        self.kept_bytes = self.responses.iter().map(|k| k.info.len() + k.body.len()).sum();
    }

    /// The API may be handed requests: it polls and waits for nothing.
    fn ready(&self) -> bool {
        self.polling && self.waiting == Waiting::Nothing
    }

    /// Gives held requests to the API once it polls and waits for nothing.
    fn release(&mut self) {
        if self.ready() && !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.out.extend_from_slice(&held);
        }
    }

    /// Native frames the core wrote for this instance, as CloudI messages.
    fn core_frames(&mut self, batch: &[u8]) -> Result<(), String> {
        let mut at = 0;
        while at < batch.len() {
            // The core's own frames: a failure here is a bug, not bad input.
            let total = match cumulo_proto::next_frame_len(&batch[at..], u32::MAX) {
                Ok(Some(t)) => t,
                _ => return Err("internal error: a partial frame in the outbox".into()),
            };
            let frame = cumulo_proto::decode(&batch[at + cumulo_proto::LEN_PREFIX..at + total])
                .map_err(|e| format!("internal error: {e}"))?;
            at += total;
            self.core_frame(frame)?;
        }
        Ok(())
    }

    fn core_frame(&mut self, frame: Frame) -> Result<(), String> {
        match frame {
            Frame::Request(r) => {
                let req = msg::Request {
                    sync: r.flags & cumulo_proto::REQUEST_SYNC != 0,
                    name: r.name,
                    pattern: r.pattern,
                    request_info: r.request_info,
                    request: r.request,
                    timeout: r.timeout,
                    priority: r.priority,
                    trans_id: &r.trans_id,
                    source: r.source,
                };
                if self.ready() {
                    put(&mut self.out, |b| msg::encode_request(b, &req));
                } else {
                    msg::encode_request(&mut self.held, &req);
                }
            }
            Frame::Response(r) => self.response(r),
            Frame::McastSent(m) if self.waiting == Waiting::Mcast(m.trans_id) => {
                let until = self.mcast_deadline;
                self.deadlines.extend(m.ids().map(|t| (t, until)));
                put(&mut self.out, |b| msg::encode_returns_async(b, m.trans_ids));
                self.waiting = Waiting::Nothing;
                self.release();
            }
            Frame::Reply(r) => {
                if r.req_id == REQ_SUBSCRIBE_COUNT && self.waiting == Waiting::Count {
                    put(&mut self.out, |b| msg::encode_subscribe_count(b, r.value));
                    self.waiting = Waiting::Nothing;
                    self.release();
                } else if r.status != Status::Ok.code() && r.req_id == REQ_SUBSCRIBE {
                    // CloudI stops a service whose subscribe fails.
                    return Err(format!("subscribe refused: {}", r.message));
                } else if r.status != Status::Ok.code() {
                    tracing::warn!(instance = self.id, "{}: unsubscribe refused: {}", self.label, r.message);
                }
            }
            // CloudI sends KEEPALIVE to external services over UDP only: a
            // CloudI API on a local socket never gets one (CloudI's
            // JavaScript API, handed one coalesced with a request, would
            // handle the request only at the next read). The core's
            // keep-alive round counts this instance as heard instead.
            Frame::Ping(_) => self.pinged = true,
            Frame::Terminate(_) => {
                msg::encode_term(&mut self.out);
            }
            Frame::Error(e) => return Err(e.message.to_string()),
            _ => {}
        }
        Ok(())
    }

    /// A response to one of this API's sends.
    fn response(&mut self, r: cumulo_proto::Return) {
        let ok = r.status == Status::Ok.code();
        if self.waiting == Waiting::Sync(r.trans_id) {
            // CloudI has no error statuses: a failed send_sync returns
            // nothing with the null trans_id, as a timeout does.
            if ok {
                put(&mut self.out, |b| {
                    msg::encode_response(b, msg::RETURN_SYNC, r.response_info, r.response, &r.trans_id)
                });
            } else {
                tracing::debug!(
                    instance = self.id,
                    "{}: send_sync failed: {}",
                    self.label,
                    String::from_utf8_lossy(r.response)
                );
                put(&mut self.out, |b| msg::encode_response(b, msg::RETURN_SYNC, b"", b"", &msg::NULL_TRANS_ID));
            }
            self.waiting = Waiting::Nothing;
            self.release();
            return;
        }
        // A response with no entry (none expected) is kept as long as a send
        // with the default timeout would be.
        let until = self.deadlines.remove(&r.trans_id).unwrap_or_else(|| self.deadline(Instant::now(), 0));
        if ok {
            self.keep(Kept { trans_id: r.trans_id, info: r.response_info.to_vec(), body: r.response.to_vec(), until });
        } else {
            if self.failed.len() == FAILED_REMEMBERED {
                self.failed.pop_front();
            }
            self.failed.push_back(r.trans_id);
        }
        self.answer_recv();
    }
}

fn native_send<'a>(s: &'a ApiSend<'a>, trans_id: TransId) -> Result<cumulo_proto::Send<'a>, String> {
    Ok(cumulo_proto::Send {
        trans_id,
        timeout: s.timeout,
        priority: s.priority,
        // CloudI retries a send whose name has no subscriber until its timeout.
        flags: cumulo_proto::SEND_WAIT_FOR_SERVICE,
        name: utf8(&s.name, "service name")?,
        request_info: s.request_info,
        request: s.request,
    })
}

fn utf8<'a>(b: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(b).map_err(|_| format!("the {what} is not UTF-8"))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(max_kept: usize) -> Adapter {
        Adapter::new(1, "test".into(), TransIdGen::new(1, 1), 5000, max_kept, Vec::new())
    }

    fn kept(a: &mut Adapter, n: u8, until: Instant) -> TransId {
        let t = TransId([n; 16]);
        a.keep(Kept { trans_id: t, info: Vec::new(), body: vec![n; 40], until });
        t
    }

    /// recv_async for `t`: the response body handed to the API, if any.
    fn recv(a: &mut Adapter, t: TransId) -> Option<Vec<u8>> {
        a.out.clear();
        a.waiting = Waiting::Recv { trans_id: t, consume: true, deadline: Instant::now() + Duration::from_secs(1) };
        a.answer_recv();
        // The body is followed by CloudI's NUL and the 16-byte trans_id.
        let end = a.out.len().saturating_sub(16 + 1);
        (a.waiting == Waiting::Nothing).then(|| a.out[end - 40..end].to_vec())
    }

    #[test]
    fn kept_responses_stay_within_max_kept_bytes_oldest_dropped() {
        let mut a = adapter(100);
        let later = Instant::now() + Duration::from_secs(60);
        let first = kept(&mut a, 1, later);
        let second = kept(&mut a, 2, later);
        let third = kept(&mut a, 3, later);
        assert_eq!(a.kept_bytes, 80);
        assert_eq!(recv(&mut a, first), None, "the oldest went to make room");
        a.waiting = Waiting::Nothing;
        assert_eq!(recv(&mut a, second), Some(vec![2; 40]));
        assert_eq!(recv(&mut a, third), Some(vec![3; 40]));
        assert_eq!(a.kept_bytes, 0);
    }

    #[test]
    fn a_response_past_its_request_deadline_is_not_handed_out() {
        let mut a = adapter(1 << 20);
        let gone = kept(&mut a, 1, Instant::now() - Duration::from_millis(1));
        let live = kept(&mut a, 2, Instant::now() + Duration::from_secs(60));
        assert_eq!(recv(&mut a, gone), None);
        a.waiting = Waiting::Nothing;
        assert_eq!(recv(&mut a, live), Some(vec![2; 40]));
    }
}
