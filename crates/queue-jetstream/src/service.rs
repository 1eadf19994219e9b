//! The queue on JetStream as a running service: its connection, its stream
//! and durable consumer, the intake (publish, await the PubAck), the
//! deliveries (pull, call, ack / nak / term) and the answers that cross
//! nodes in `destination` mode.
//!
//! Every node that runs the same queue (the same stream) shares one durable
//! pull consumer: work-queue semantics, each request goes to one node at a
//! time; a node that dies with deliveries in flight has them redelivered
//! elsewhere once `ack_wait` passes.

use crate::record::{self, Message};
use crate::report::{Counters, JetStreamReport, Snapshot};
use crate::{Connect, Names};
use async_nats::jetstream::message::AckKind;
use async_nats::jetstream::{self, consumer, stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use cumulo_queue::shared::{
    attempt_timeout, dead_letter_info, delivery_info, history, now_ms, prepare, send_reply, verdict, Failure, Verdict,
};
use cumulo_queue::{Backend, Mode, Settings};
use cumulo_service::{info, Request, Response, SendOptions, ServiceApi, ServiceError, Status};
use futures_util::StreamExt;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// The durable consumer every node of the queue pulls from.
pub(crate) const CONSUMER: &str = "cumulo-deliver";
/// `ack_wait` when `timeout_ms` is not set; in-progress acks every half of
/// it keep a longer attempt's message from being redelivered, so it only
/// says how soon the deliveries of a node that died go to another one.
const DEFAULT_ACK_WAIT_MS: u64 = 5_000;
/// An attempt's timeout when neither the settings nor the request give one
/// (as the file backend's).
const DEFAULT_TIMEOUT_MS: u32 = 5_000;
/// Failure histories kept for requests that will be tried again (the
/// oldest forgotten first).
const MAX_HISTORIES: usize = 100_000;
/// Answers that arrived before their PubAck (`destination` mode): how long
/// and how many are kept.
const EARLY_KEEP: Duration = Duration::from_secs(30);
const MAX_EARLY: usize = 10_000;
/// The longest wait for a JetStream API answer (stream info, acks with a
/// reply, dead letters) before the queue gives up on it.
const API_TIMEOUT: Duration = Duration::from_secs(5);
/// Pull requests wait this long for messages before asking again.
const PULL_EXPIRES: Duration = Duration::from_secs(1);
/// Requests out to the consumer at once (in flight on every node, and
/// waiting out a retry delay), per `max_in_flight`.
const ACK_PENDING_PER_IN_FLIGHT: i64 = 4;

/// A request held until the destination answers (`destination` mode).
type Waiter<R> = (Instant, R);

/// What the tasks of one queue share.
pub(crate) struct Shared<A: ServiceApi> {
    pub api: A,
    pub settings: Settings,
    pub names: Names,
    pub replicas: u32,
    /// This instance's name: answers for its waiting senders come to
    /// `<names.answers>.<instance>`.
    pub instance: String,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub ack_wait: Duration,
    pub waiters: RefCell<HashMap<u64, Vec<Waiter<A::Request>>>>,
    early: RefCell<HashMap<u64, (Instant, Response)>>,
    histories: RefCell<Histories>,
    pub counters: RefCell<Counters>,
    pub in_flight: Cell<u32>,
    slot: Notify,
    pub snapshot: RefCell<Snapshot>,
}

/// The failed attempts this node saw of the requests it will try again.
#[derive(Default)]
struct Histories {
    of: HashMap<u64, Vec<Failure>>,
    order: std::collections::VecDeque<u64>,
}

impl Histories {
    fn push(&mut self, id: u64, f: Failure) {
        let h = self.of.entry(id).or_default();
        if h.is_empty() {
            self.order.push_back(id);
        }
        h.push(f);
        while self.of.len() > MAX_HISTORIES {
            let Some(old) = self.order.pop_front() else { break };
            self.of.remove(&old);
        }
    }

    fn take(&mut self, id: u64) -> Vec<Failure> {
        self.of.remove(&id).unwrap_or_default()
    }
}

/// The NATS client options from the core's `[cluster]` section.
async fn options(c: &Connect, prefix: &str) -> Result<async_nats::ConnectOptions, String> {
    let mut o = match &c.creds_file {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| format!("cluster.creds_file {}: {e}", path.display()))?,
        None => async_nats::ConnectOptions::new(),
    };
    if let (Some(u), Some(p)) = (&c.user, &c.password) {
        o = o.user_and_password(u.clone(), p.clone());
    }
    if let Some(t) = &c.token {
        o = o.token(t.clone());
    }
    if c.tls_required {
        o = o.require_tls(true);
    }
    if let Some(ca) = &c.tls_ca_file {
        o = o.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&c.tls_cert_file, &c.tls_key_file) {
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(o.name(format!("cumulo {} queue {prefix}", c.node))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .ping_interval(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(2))
        .request_timeout(Some(API_TIMEOUT))
        .reconnect_delay_callback(|attempts| Duration::from_millis((attempts as u64 * 100).min(2_000))))
}

pub(crate) async fn run<A: ServiceApi + 'static>(settings: Settings, connect: Connect, api: A) {
    let prefix = api.prefix().to_string();
    let Backend::JetStream { replicas, stream } = settings.backend.clone() else { return };
    let names = Names::new(&connect.cloud, &prefix, stream.as_deref());
    let client = match options(&connect, &prefix).await {
        Ok(o) => match o.connect(connect.servers.clone()).await {
            Ok(c) => c,
            Err(e) => return tracing::error!("queue {prefix}: cannot connect to NATS {:?}: {e}", connect.servers),
        },
        Err(e) => return tracing::error!("queue {prefix}: {e}"),
    };
    let js = jetstream::ContextBuilder::new().timeout(API_TIMEOUT).build(client.clone());
    let ack_wait = Duration::from_millis(match settings.timeout_ms {
        0 => DEFAULT_ACK_WAIT_MS,
        t => (t as u64).clamp(1_000, 30_000),
    });
    // The stream and the consumer, made or brought up to these settings;
    // until then the queue does not subscribe (senders get NO_SERVICE).
    let mut tries = 0u32;
    let consumer = loop {
        match setup(&js, &names, &settings, replicas, ack_wait).await {
            Ok(c) => break c,
            Err(e) => {
                if tries.is_multiple_of(10) {
                    tracing::warn!("queue {prefix}: cannot set up stream {} on NATS: {e}; trying again", names.stream);
                }
                tries += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    let instance = format!("{}-{:016x}", sanitize(&connect.node), fastrand::u64(..));
    let answers = match client.subscribe(format!("{}.{instance}", names.answers)).await {
        Ok(s) => s,
        Err(e) => return tracing::error!("queue {prefix}: cannot subscribe to its answers on NATS: {e}"),
    };
    let shared = Rc::new(Shared {
        api,
        settings,
        names,
        replicas,
        instance,
        client,
        js,
        ack_wait,
        waiters: RefCell::new(HashMap::new()),
        early: RefCell::new(HashMap::new()),
        histories: RefCell::new(Histories::default()),
        counters: RefCell::new(Counters::default()),
        in_flight: Cell::new(0),
        slot: Notify::new(),
        snapshot: RefCell::new(Snapshot::default()),
    });
    if let Err(e) = shared.api.subscribe("*") {
        return tracing::error!("queue {prefix}: cannot subscribe: {}", e.why());
    }
    shared.api.report(Rc::new(JetStreamReport::new(&shared)));
    tracing::info!(
        "queue {prefix}: JetStream stream {} (subject {}, {} replicas), mode {}",
        shared.names.stream,
        shared.names.subject,
        replicas,
        match shared.settings.mode {
            Mode::Destination => "destination",
            Mode::Accepted => "accepted",
        }
    );
    // In join sets: when the service stops, its intakes and attempts stop
    // with it (an attempt cut short is delivered again after ack_wait).
    let (intakes, attempts) = (RefCell::new(JoinSet::new()), RefCell::new(JoinSet::new()));
    tokio::join!(
        accept(&shared, &intakes),
        deliver(&shared, consumer, &attempts),
        listen(&shared, answers),
        crate::report::refresh(&shared)
    );
}

/// A node name as one token of a subject.
fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// Creates or updates the stream (and the dead letters' one) and the
/// durable consumer.
async fn setup(
    js: &jetstream::Context,
    names: &Names,
    s: &Settings,
    replicas: u32,
    ack_wait: Duration,
) -> Result<consumer::PullConsumer, String> {
    js.create_or_update_stream(stream::Config {
        name: names.stream.clone(),
        subjects: vec![names.subject.clone()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        num_replicas: replicas as usize,
        max_messages: s.max_messages as i64,
        max_bytes: s.max_bytes as i64,
        discard: stream::DiscardPolicy::New,
        duplicate_window: s.dedup_window,
        description: Some("cumulo queue: requests waiting for delivery".into()),
        ..Default::default()
    })
    .await
    .map_err(|e| format!("stream {}: {e}", names.stream))?;
    if s.max_dead_letters > 0 {
        js.create_or_update_stream(stream::Config {
            name: names.dead_stream.clone(),
            subjects: vec![names.dead_subject.clone()],
            retention: stream::RetentionPolicy::Limits,
            storage: stream::StorageType::File,
            num_replicas: replicas as usize,
            max_messages: s.max_dead_letters as i64,
            max_bytes: s.max_bytes as i64,
            discard: stream::DiscardPolicy::Old,
            description: Some("cumulo queue: dead letters kept for replay".into()),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("stream {}: {e}", names.dead_stream))?;
    }
    let stream = js.get_stream(&names.stream).await.map_err(|e| format!("stream {}: {e}", names.stream))?;
    stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some(CONSUMER.into()),
            description: Some("cumulo queue: deliveries, shared by every node of the queue".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait,
            // One more than the attempts: a request whose last attempt was
            // cut short (its node died) comes once more, to be made a dead
            // letter without another attempt.
            max_deliver: s.max_deliveries as i64 + 1,
            max_ack_pending: s.max_in_flight as i64 * ACK_PENDING_PER_IN_FLIGHT,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("consumer {CONSUMER} of {}: {e}", names.stream))
}

/// Takes each request as it comes, each in a task of its own.
async fn accept<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, tasks: &RefCell<JoinSet<()>>) {
    while let Some(req) = shared.api.next_request().await {
        let mut tasks = tasks.borrow_mut();
        while tasks.try_join_next().is_some() {}
        tasks.spawn_local(take(shared.clone(), req));
    }
}

/// Answers `req` with an error from this queue.
fn refuse<A: ServiceApi>(api: &A, req: &A::Request, e: ServiceError) {
    api.return_(req, e.status(), b"", e.why().as_bytes());
}

fn id_info(id: u64) -> Vec<u8> {
    let mut ri = Vec::new();
    info::push(&mut ri, b"queue-id", id.to_string().as_bytes());
    ri
}

/// A request arrives: checked, published, acknowledged once the stream
/// has it (or held until its answer in `destination` mode).
async fn take<A: ServiceApi + 'static>(shared: Rc<Shared<A>>, req: A::Request) {
    let s = &shared.settings;
    let prefix = shared.api.prefix().to_string();
    let p = match prepare(&shared.api, s, &req) {
        Ok(p) => p,
        Err(e) => return refuse(&shared.api, &req, e),
    };
    let m = Message {
        id: 0,
        arrived_ms: p.arrived_ms,
        expires_ms: p.expires_ms,
        timeout_ms: p.timeout_ms,
        priority: p.priority,
        destination: p.destination,
        reply_to: p.reply_to,
        origin: if s.mode == Mode::Destination { shared.instance.clone() } else { String::new() },
        request_info: req.request_info().to_vec(),
        body: req.body().to_vec(),
    };
    let payload = m.encode();
    let mut headers = HeaderMap::new();
    let mut header_bytes = 0;
    if !p.idempotency_key.is_empty() && !s.dedup_window.is_zero() {
        let id = record::msg_id(&p.idempotency_key);
        header_bytes = 32 + id.len();
        headers.insert("Nats-Msg-Id", id.as_str());
    }
    let max = shared.client.server_info().max_payload;
    if max > 0 && payload.len() + header_bytes > max {
        shared.counters.borrow_mut().refused_other += 1;
        let e = ServiceError::new(
            Status::TooLarge,
            format!(
                "queue {prefix}: the request ({} bytes with the queue's framing) is over the NATS server's \
                 max_payload ({max} bytes); nothing was stored",
                payload.len() + header_bytes
            ),
        );
        return refuse(&shared.api, &req, e);
    }
    // Never a hang: the publish and its PubAck within the request's own
    // timeout, less a little so that the sender hears why.
    let left = req.remaining_ms();
    let limit = Duration::from_millis(left.saturating_sub((left / 10).min(100)).max(1) as u64);
    let published =
        tokio::time::timeout(limit, publish(&shared.js, shared.names.subject.clone(), headers, payload)).await;
    let ack = match published {
        Ok(Ok(ack)) => ack,
        Ok(Err(e)) => {
            let e = publish_error(&prefix, s, e);
            let mut c = shared.counters.borrow_mut();
            match e.status() {
                Status::QueueFull => c.refused_full += 1,
                _ => c.refused_other += 1,
            }
            drop(c);
            return refuse(&shared.api, &req, e);
        }
        Err(_) => {
            shared.counters.borrow_mut().refused_other += 1;
            let e = ServiceError::new(
                Status::ServiceError,
                format!(
                    "queue {prefix}: NATS did not acknowledge the request within its timeout ({left} ms): it may \
                     or may not be stored (send it again with an idempotency-key to be sure)"
                ),
            );
            return refuse(&shared.api, &req, e);
        }
    };
    let id = ack.sequence;
    if ack.duplicate {
        shared.counters.borrow_mut().duplicates += 1;
        if s.mode == Mode::Destination {
            if let Some(w) = shared.waiters.borrow_mut().get_mut(&id) {
                w.push((Instant::now() + Duration::from_millis(left as u64), req));
                return;
            }
        }
        let mut ri = id_info(id);
        info::push(&mut ri, b"queue-duplicate", b"1");
        return shared.api.return_(&req, Status::Ok, &ri, id.to_string().as_bytes());
    }
    shared.counters.borrow_mut().enqueued += 1;
    match s.mode {
        Mode::Accepted => shared.api.return_(&req, Status::Ok, &id_info(id), id.to_string().as_bytes()),
        Mode::Destination => {
            let early = shared.early.borrow_mut().remove(&id);
            match early {
                // Delivered and answered before the PubAck came back.
                Some((_, answer)) => {
                    let ri = answer_info(&answer, id);
                    shared.api.return_(&req, answer.status, &ri, &answer.response);
                }
                None => shared
                    .waiters
                    .borrow_mut()
                    .entry(id)
                    .or_default()
                    .push((Instant::now() + Duration::from_millis(left as u64), req)),
            }
        }
    }
}

/// Publishes and waits for the PubAck.
pub(crate) async fn publish(
    js: &jetstream::Context,
    subject: String,
    headers: HeaderMap,
    payload: Vec<u8>,
) -> Result<jetstream::publish::PublishAck, jetstream::context::PublishError> {
    js.publish_with_headers(subject, headers, Bytes::from(payload)).await?.await
}

/// What the sender sees of a refused publish.
fn publish_error(prefix: &str, s: &Settings, e: jetstream::context::PublishError) -> ServiceError {
    use jetstream::context::PublishErrorKind as K;
    let text = match std::error::Error::source(&e) {
        Some(src) => format!("{e}: {src}"),
        None => e.to_string(),
    };
    let low = text.to_ascii_lowercase();
    match e.kind() {
        K::MaxPayloadExceeded => ServiceError::new(
            Status::TooLarge,
            format!("queue {prefix}: the request is over the NATS server's max_payload ({text}); nothing was stored"),
        ),
        _ if low.contains("maximum messages") => ServiceError::new(
            Status::QueueFull,
            format!("queue {prefix} is full: max_messages ({}) reached ({text})", s.max_messages),
        ),
        _ if low.contains("maximum bytes") => ServiceError::new(
            Status::QueueFull,
            format!("queue {prefix} is full: max_bytes ({} bytes) reached ({text})", s.max_bytes),
        ),
        _ if low.contains("insufficient resources") || low.contains("resource limits") => ServiceError::new(
            Status::QueueFull,
            format!("queue {prefix} is full: JetStream has no room for it ({text}); nothing was stored"),
        ),
        K::StreamNotFound => ServiceError::new(
            Status::ServiceError,
            format!("queue {prefix}: no JetStream stream takes its subject (was it deleted?): nothing was stored"),
        ),
        _ => ServiceError::new(
            Status::ServiceError,
            format!("queue {prefix}: NATS did not store the request ({text}); it may or may not be stored"),
        ),
    }
}

/// Frees a delivery's slot when the attempt ends, however it ends.
struct Slot<A: ServiceApi>(Rc<Shared<A>>);

impl<A: ServiceApi> Drop for Slot<A> {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get().saturating_sub(1));
        self.0.slot.notify_one();
    }
}

/// Pulls as many messages as there is room for (`max_in_flight` on this
/// node) and starts an attempt for each.
async fn deliver<A: ServiceApi + 'static>(
    shared: &Rc<Shared<A>>,
    consumer: consumer::PullConsumer,
    tasks: &RefCell<JoinSet<()>>,
) {
    let prefix = shared.api.prefix().to_string();
    let mut failures = 0u32;
    loop {
        let room = shared.settings.max_in_flight.saturating_sub(shared.in_flight.get());
        if room == 0 {
            shared.slot.notified().await;
            continue;
        }
        let batch = consumer.batch().max_messages(room as usize).expires(PULL_EXPIRES).messages().await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                if failures.is_multiple_of(30) {
                    tracing::warn!("queue {prefix}: cannot pull from {}: {e}", shared.names.stream);
                }
                failures += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
        };
        while let Some(m) = batch.next().await {
            match m {
                Ok(m) => {
                    failures = 0;
                    shared.in_flight.set(shared.in_flight.get() + 1);
                    let mut tasks = tasks.borrow_mut();
                    while tasks.try_join_next().is_some() {}
                    tasks.spawn_local(attempt(Slot(shared.clone()), m));
                }
                Err(e) => {
                    tracing::debug!("queue {prefix}: pull ended: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    break;
                }
            }
        }
    }
}

/// Waits at most `API_TIMEOUT` for an ack that the server confirms.
async fn confirm(what: &str, f: impl std::future::Future<Output = Result<(), async_nats::Error>>) -> bool {
    match tokio::time::timeout(API_TIMEOUT, f).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::warn!("{what}: {e}");
            false
        }
        Err(_) => {
            tracing::warn!("{what}: no answer from NATS within {API_TIMEOUT:?}");
            false
        }
    }
}

/// One attempt of one request (the message's delivered count is the
/// attempt's number: attempts on other nodes, and cut short by a crash,
/// count).
async fn attempt<A: ServiceApi + 'static>(slot: Slot<A>, msg: jetstream::Message) {
    let shared = slot.0.clone();
    let prefix = shared.api.prefix().to_string();
    let (seq, delivered) = match msg.info() {
        Ok(i) => (i.stream_sequence, i.delivered.max(1) as u32),
        Err(e) => {
            tracing::warn!("queue {prefix}: a message without delivery info ({e}): dropped");
            let _ = msg.ack_with(AckKind::Term).await;
            return;
        }
    };
    let Some(m) = Message::decode(&msg.payload) else {
        tracing::warn!("queue {prefix}: message {seq} of {} is not a queue request: dropped", shared.names.stream);
        let _ = msg.ack_with(AckKind::Term).await;
        return;
    };
    let id = if m.id != 0 { m.id } else { seq };
    let now = now_ms();
    if m.expires_ms != 0 && now >= m.expires_ms {
        shared.counters.borrow_mut().expired += 1;
        let answer = failed_answer(id, &m, Status::Timeout, "its deadline (expires_ms) passed before it was delivered");
        return dead(&shared, &msg, &m, id, delivered.saturating_sub(1), None, answer).await;
    }
    if delivered > shared.settings.max_deliveries {
        let answer = failed_answer(id, &m, Status::Crashed, "its attempts ran out (the last one cut short)");
        return dead(&shared, &msg, &m, id, shared.settings.max_deliveries, None, answer).await;
    }
    if delivered > 1 {
        shared.counters.borrow_mut().redelivered += 1;
    }
    let timeout = attempt_timeout(m.timeout_ms, m.expires_ms, now);
    let ri = delivery_info(&m.request_info, id, delivered);
    let o = SendOptions { timeout_ms: timeout, priority: m.priority, wait_for_service: false };
    let call = shared.api.call(&m.destination, &ri, &m.body, o);
    tokio::pin!(call);
    // In-progress acks while the destination works: the message is not
    // given to another node while this one still waits for its answer.
    let every = shared.ack_wait / 2;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let answer = loop {
        tokio::select! {
            a = &mut call => break a,
            _ = tick.tick() => { let _ = msg.ack_with(AckKind::Progress).await; }
        }
    };
    let now = now_ms();
    let failure = Failure { attempt: delivered, at_ms: now, status: answer.status.code() };
    match verdict(&shared.settings, answer.status, delivered, m.expires_ms, now) {
        Verdict::Finished => {
            let what = format!("queue {prefix}: ack of request {id}");
            // Not confirmed (NATS away): it will be delivered again.
            confirm(&what, msg.double_ack()).await;
            shared.histories.borrow_mut().take(id);
            {
                let mut c = shared.counters.borrow_mut();
                if answer.status == Status::Ok {
                    c.delivered += 1;
                } else {
                    c.answered_error += 1;
                }
            }
            answered(&shared, &m, id, answer);
        }
        Verdict::Retry { due_ms } => {
            shared.histories.borrow_mut().push(id, failure);
            shared.counters.borrow_mut().retried += 1;
            let delay = Duration::from_millis(due_ms.saturating_sub(now_ms()));
            let _ = msg.ack_with(AckKind::Nak(Some(delay))).await;
        }
        Verdict::Dead { expired } => {
            shared.counters.borrow_mut().expired += expired as u64;
            dead(&shared, &msg, &m, id, delivered, Some(failure), answer).await
        }
    }
    drop(slot);
}

/// An answer made by the queue for a request it gives up on.
fn failed_answer(id: u64, m: &Message, status: Status, why: &str) -> Response {
    Response {
        trans_id: Default::default(),
        status,
        response_info: vec![],
        response: format!("queue: request {id} to {}: {why}", m.destination).into_bytes(),
    }
}

fn answer_info(answer: &Response, id: u64) -> Vec<u8> {
    let mut ri = answer.response_info.clone();
    info::push(&mut ri, b"queue-id", id.to_string().as_bytes());
    ri
}

/// Out of attempts or time: kept in the dead letters' stream (up to
/// `max_dead_letters`, the oldest dropped first), taken off the queue's
/// stream, answered, and sent to `dead_letter` if set (once that answers
/// `OK`, it is not kept).
async fn dead<A: ServiceApi + 'static>(
    shared: &Rc<Shared<A>>,
    msg: &jetstream::Message,
    m: &Message,
    id: u64,
    attempts: u32,
    last: Option<Failure>,
    answer: Response,
) {
    let prefix = shared.api.prefix().to_string();
    let s = &shared.settings;
    let failures = shared.histories.borrow_mut().take(id);
    let history_text = history(failures.iter().chain(last.as_ref()));
    let mut kept = None;
    if s.max_dead_letters > 0 {
        let mut copy = m.clone();
        copy.id = id;
        let mut h = HeaderMap::new();
        h.insert("Cumulo-Attempts", attempts.to_string().as_str());
        h.insert("Cumulo-History", history_text.as_str());
        let put =
            tokio::time::timeout(API_TIMEOUT, publish(&shared.js, shared.names.dead_subject.clone(), h, copy.encode()))
                .await;
        match put {
            Ok(Ok(ack)) => kept = Some(ack.sequence),
            other => {
                let why = match other {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no PubAck".into(),
                };
                tracing::warn!(
                    "queue {prefix}: cannot keep request {id} as a dead letter ({why}): it stays in the stream and \
                     comes back once"
                );
                let _ = msg.ack_with(AckKind::Nak(Some(s.retry_delay.max(Duration::from_millis(100))))).await;
                for f in failures {
                    shared.histories.borrow_mut().push(id, f);
                }
                return;
            }
        }
    }
    confirm(&format!("queue {prefix}: end of dead letter {id}"), msg.double_ack_with(AckKind::Term)).await;
    shared.counters.borrow_mut().dead_lettered += 1;
    tracing::warn!(
        "queue {prefix}: request {id} to {} is a dead letter after {attempts} attempts ({history_text}){}",
        m.destination,
        if kept.is_none() { "; not kept: max_dead_letters is 0" } else { "" }
    );
    answered(shared, m, id, answer);
    let Some(to) = s.dead_letter.clone() else { return };
    let ri = dead_letter_info(&m.request_info, id, &m.destination, attempts, &history_text);
    let timeout = if m.timeout_ms > 0 { m.timeout_ms } else { DEFAULT_TIMEOUT_MS };
    let o = SendOptions { timeout_ms: timeout, priority: m.priority, wait_for_service: false };
    let call = shared.api.call(&to, &ri, &m.body, o);
    let (js, dead_stream) = (shared.js.clone(), shared.names.dead_stream.clone());
    tokio::task::spawn_local(async move {
        let r = call.await;
        if r.status != Status::Ok {
            return tracing::warn!(
                "queue {prefix}: dead letter {id} not taken by {to} ({}): kept in {dead_stream} for replay",
                r.status
            );
        }
        // Handed over: the dead_letter service has it now.
        if let Some(seq) = kept {
            let deleted = async { js.get_stream(&dead_stream).await.ok()?.delete_message(seq).await.ok() };
            let _ = tokio::time::timeout(API_TIMEOUT, deleted).await;
        }
    });
}

/// The request is finished: its waiting sender gets the answer (here, or
/// on the node that took it), and its `reply_to`, if any, gets it as a
/// request.
fn answered<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, m: &Message, id: u64, answer: Response) {
    if !m.origin.is_empty() {
        if m.origin == shared.instance {
            answer_here(shared, id, answer.clone());
        } else {
            let mut payload = record::encode_answer(id, answer.status, &answer.response_info, &answer.response);
            let max = shared.client.server_info().max_payload;
            if max > 0 && payload.len() > max {
                let why =
                    format!("queue: the answer of request {id} ({} bytes) is over NATS max_payload", payload.len());
                payload = record::encode_answer(id, Status::TooLarge, b"", why.as_bytes());
            }
            let (client, subject) = (shared.client.clone(), format!("{}.{}", shared.names.answers, m.origin));
            tokio::task::spawn_local(async move {
                let _ = client.publish(subject, Bytes::from(payload)).await;
            });
        }
    }
    if !m.reply_to.is_empty() {
        send_reply(&shared.api, id, &m.destination, &m.reply_to, &answer, m.timeout_ms, m.priority);
    }
}

/// An answer for senders waiting on this node; kept a while if it came
/// before their PubAck.
fn answer_here<A: ServiceApi>(shared: &Shared<A>, id: u64, answer: Response) {
    let waiting = shared.waiters.borrow_mut().remove(&id);
    match waiting {
        Some(waiting) => {
            let ri = answer_info(&answer, id);
            for (_, req) in waiting {
                shared.api.return_(&req, answer.status, &ri, &answer.response);
            }
        }
        None => {
            let mut early = shared.early.borrow_mut();
            if early.len() < MAX_EARLY {
                early.insert(id, (Instant::now(), answer));
            }
        }
    }
}

/// Answers from the nodes that delivered this node's requests.
async fn listen<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, mut answers: async_nats::Subscriber) {
    while let Some(msg) = answers.next().await {
        if let Some((id, status, info, body)) = record::decode_answer(&msg.payload) {
            let answer = Response { trans_id: Default::default(), status, response_info: info, response: body };
            answer_here(shared, id, answer);
        }
    }
}

/// Forgets waiters whose sender stopped waiting (the core answered it
/// `TIMEOUT`) and answers that came for nobody.
pub(crate) fn sweep<A: ServiceApi>(shared: &Shared<A>) {
    let now = Instant::now();
    shared.waiters.borrow_mut().retain(|_, w| {
        w.retain(|(until, _)| *until > now);
        !w.is_empty()
    });
    shared.early.borrow_mut().retain(|_, (at, _)| now.duration_since(*at) < EARLY_KEEP);
}
