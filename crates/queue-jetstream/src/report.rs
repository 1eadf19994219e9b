//! What operators see of a queue on JetStream (`GET /v1/queues`, `cumulo
//! queues`, the dashboard, `/metrics`) and what they can do (list, replay
//! and purge dead letters). `Report::view` is synchronous: a task asks the
//! servers every second and keeps a snapshot.

use crate::record::Message;
use crate::service::{publish, sweep, Shared, CONSUMER};
use async_nats::HeaderMap;
use cumulo_queue::shared::now_ms;
use cumulo_queue::Mode;
use cumulo_service::{Metric, MetricKind, Report, ServiceApi, ServiceError, Status};
use serde_json::{json, Value};
use std::rc::{Rc, Weak};
use std::time::Duration;

/// How often the snapshot is refreshed.
const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Dead letters kept in the snapshot (and listed at most).
const MAX_LISTED: usize = 100;
/// Sequences read at most to fill that list (deleted ones are skipped).
const MAX_READ: u64 = 1000;
/// Longest wait for the servers' answers in one refresh.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// Counters since the queue started on this node.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub enqueued: u64,
    pub duplicates: u64,
    pub refused_full: u64,
    pub refused_other: u64,
    pub delivered: u64,
    pub answered_error: u64,
    pub retried: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    pub expired: u64,
    pub replayed: u64,
    pub purged: u64,
}

/// The servers' figures, as of `at_ms`.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub at_ms: u64,
    pub error: Option<String>,
    pub messages: u64,
    pub bytes: u64,
    /// When the oldest request in the stream arrived (Unix ms).
    pub oldest_ms: Option<u64>,
    /// The consumer: waiting for delivery, delivered and not yet acked
    /// (on every node, with those waiting out a retry delay), redelivered.
    pub pending: u64,
    pub ack_pending: u64,
    pub redelivered: u64,
    pub dead_letters: u64,
    pub dead_bytes: u64,
    /// The server leading the stream (a cluster), and its other replicas
    /// with whether each is current.
    pub leader: Option<String>,
    pub peers: Vec<(String, bool)>,
    /// (first, last) sequence of the dead letters' stream the list is of.
    dead_range: (u64, u64, u64),
    pub dead_list: Vec<Value>,
}

pub(crate) struct JetStreamReport<A: ServiceApi> {
    shared: Weak<Shared<A>>,
    prefix: String,
}

impl<A: ServiceApi> JetStreamReport<A> {
    pub fn new(shared: &Rc<Shared<A>>) -> JetStreamReport<A> {
        JetStreamReport { shared: Rc::downgrade(shared), prefix: shared.api.prefix().to_string() }
    }

    fn shared(&self) -> Result<Rc<Shared<A>>, ServiceError> {
        self.shared.upgrade().ok_or_else(|| ServiceError::new(Status::ShuttingDown, "the queue stopped"))
    }
}

/// Refreshes the snapshot every second, and forgets waiters whose senders
/// stopped waiting.
pub(crate) async fn refresh<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>) {
    loop {
        sweep(shared);
        let known = shared.snapshot.borrow().clone();
        let next = match tokio::time::timeout(ASK_TIMEOUT * 3, ask(shared, known.clone())).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => Snapshot { error: Some(e), at_ms: now_ms(), ..known },
            Err(_) => Snapshot { error: Some("the servers did not answer in time".into()), at_ms: now_ms(), ..known },
        };
        *shared.snapshot.borrow_mut() = next;
        tokio::time::sleep(REFRESH_EVERY).await;
    }
}

async fn ask<A: ServiceApi>(shared: &Shared<A>, known: Snapshot) -> Result<Snapshot, String> {
    let n = &shared.names;
    let mut stream = shared.js.get_stream(&n.stream).await.map_err(|e| format!("stream {}: {e}", n.stream))?;
    let info = stream.info().await.map_err(|e| format!("stream {}: {e}", n.stream))?;
    let state = info.state.clone();
    let (leader, peers) = match &info.cluster {
        Some(c) => (c.leader.clone(), c.replicas.iter().map(|p| (p.name.clone(), p.current && !p.offline)).collect()),
        None => (None, Vec::new()),
    };
    let c = stream.consumer_info(CONSUMER).await.map_err(|e| format!("consumer {CONSUMER}: {e}"))?;
    let mut s = Snapshot {
        at_ms: now_ms(),
        error: None,
        messages: state.messages,
        bytes: state.bytes,
        oldest_ms: (state.messages > 0).then(|| (state.first_timestamp.unix_timestamp_nanos() / 1_000_000) as u64),
        pending: c.num_pending,
        ack_pending: c.num_ack_pending as u64,
        redelivered: c.num_redelivered as u64,
        leader,
        peers,
        dead_range: known.dead_range,
        dead_list: known.dead_list,
        ..Default::default()
    };
    if shared.settings.max_dead_letters == 0 {
        return Ok(s);
    }
    let mut dead = shared.js.get_stream(&n.dead_stream).await.map_err(|e| format!("stream {}: {e}", n.dead_stream))?;
    let d = dead.info().await.map_err(|e| format!("stream {}: {e}", n.dead_stream))?.state.clone();
    s.dead_letters = d.messages;
    s.dead_bytes = d.bytes;
    let range = (d.first_sequence, d.last_sequence, d.messages);
    if range != s.dead_range {
        let mut list = Vec::new();
        let mut seq = d.first_sequence.max(1);
        while d.messages > 0 && seq <= d.last_sequence && seq < d.first_sequence + MAX_READ && list.len() < MAX_LISTED {
            if let Ok(m) = tokio::time::timeout(ASK_TIMEOUT, dead.get_raw_message(seq)).await.map_err(|_| "timeout")? {
                list.push(listed(seq, &m.headers, &m.payload));
            }
            seq += 1;
        }
        s.dead_list = list;
        s.dead_range = range;
    }
    Ok(s)
}

/// One dead letter as `dead_letters` lists it (as the file backend does,
/// with `seq`: its place in the dead letters' stream).
fn listed(seq: u64, headers: &HeaderMap, payload: &[u8]) -> Value {
    let text = |k: &str| headers.get(k).map(|v| v.as_str().to_string()).unwrap_or_default();
    let history: Vec<Value> = text("Cumulo-History")
        .split(',')
        .filter(|h| !h.is_empty())
        .filter_map(|h| {
            let (attempt, rest) = h.split_once(':')?;
            let (status, at) = rest.split_once('@')?;
            Some(json!({ "attempt": attempt.parse::<u32>().ok()?, "at_ms": at.parse::<u64>().ok()?, "status": status }))
        })
        .collect();
    let attempts: u32 = text("Cumulo-Attempts").parse().unwrap_or(0);
    match Message::decode(payload) {
        Some(m) => json!({
            "id": m.id, "seq": seq, "destination": m.destination, "arrived_ms": m.arrived_ms,
            "attempts": attempts, "bytes": m.body.len(), "history": history,
        }),
        None => json!({ "seq": seq, "attempts": attempts, "history": history, "bytes": payload.len() }),
    }
}

impl<A: ServiceApi + 'static> Report for JetStreamReport<A> {
    fn kind(&self) -> &'static str {
        "queue"
    }

    fn id(&self) -> String {
        self.prefix.clone()
    }

    fn view(&self) -> Value {
        let Ok(shared) = self.shared() else { return json!({ "prefix": self.prefix, "running": false }) };
        let s = &shared.settings;
        let snap = shared.snapshot.borrow();
        let c = *shared.counters.borrow();
        json!({
            "prefix": self.prefix,
            "running": true,
            "backend": "jetstream",
            "stream": shared.names.stream,
            "subject": shared.names.subject,
            "dead_stream": if s.max_dead_letters > 0 { Some(&shared.names.dead_stream) } else { None },
            "replicas": shared.replicas,
            "leader": snap.leader,
            "peers": snap.peers.iter().map(|(name, current)| json!({ "name": name, "current": current })).collect::<Vec<_>>(),
            "mode": match s.mode { Mode::Destination => "destination", Mode::Accepted => "accepted" },
            // What the dashboard and `cumulo queues` show in their sync column.
            "sync": format!("jetstream, {} replica(s)", shared.replicas),
            "oldest_age_ms": snap.oldest_ms.map(|t| now_ms().saturating_sub(t)),
            "depth": snap.pending,
            "in_flight": snap.ack_pending,
            "in_flight_here": shared.in_flight.get(),
            "waiting_senders": shared.waiters.borrow().values().map(Vec::len).sum::<usize>(),
            "dead_letters": snap.dead_letters,
            "messages": snap.messages,
            "max_messages": s.max_messages,
            "bytes_on_disk": snap.bytes,
            "dead_bytes": snap.dead_bytes,
            "max_bytes": s.max_bytes,
            "redelivered_now": snap.redelivered,
            "ack_wait_ms": shared.ack_wait.as_millis() as u64,
            "snapshot_ms": snap.at_ms,
            "error": snap.error,
            "enqueued": c.enqueued,
            "duplicates": c.duplicates,
            "refused_full": c.refused_full,
            "refused_other": c.refused_other,
            "delivered": c.delivered,
            "answered_error": c.answered_error,
            "redelivered": c.retried + c.redelivered,
            "retried": c.retried,
            "dead_lettered": c.dead_lettered,
            "expired": c.expired,
            "replayed": c.replayed,
            "purged": c.purged,
        })
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        let Ok(shared) = self.shared() else { return };
        let snap = shared.snapshot.borrow();
        let c = *shared.counters.borrow();
        let label = || vec![("queue", self.prefix.clone())];
        let mut put = |name, help, kind, value: f64| out.push(Metric { name, help, kind, labels: label(), value });
        use MetricKind::{Counter, Gauge};
        put("queue_waiting", "Requests of the queue service waiting for delivery.", Gauge, snap.pending as f64);
        put("queue_in_flight", "Deliveries in progress.", Gauge, snap.ack_pending as f64);
        put("queue_dead_letters", "Dead letters kept for replay.", Gauge, snap.dead_letters as f64);
        put("queue_bytes_on_disk", "Bytes of the queue's stream.", Gauge, snap.bytes as f64);
        put("queue_enqueued_total", "Requests stored and acknowledged.", Counter, c.enqueued as f64);
        put("queue_delivered_total", "Requests delivered and answered OK.", Counter, c.delivered as f64);
        put("queue_redelivered_total", "Attempts after a failed one.", Counter, (c.retried + c.redelivered) as f64);
        put("queue_dead_lettered_total", "Requests out of attempts or time.", Counter, c.dead_lettered as f64);
        put("queue_duplicates_total", "Requests not stored again (idempotency-key).", Counter, c.duplicates as f64);
        put("queue_refused_total", "Requests refused with QUEUE_FULL.", Counter, c.refused_full as f64);
    }

    fn operate(&self, op: &str, args: &Value) -> Result<Value, ServiceError> {
        let shared = self.shared()?;
        let prefix = self.prefix.clone();
        let known = shared.snapshot.borrow().dead_letters;
        match op {
            "dead_letters" => {
                let limit = args.get("limit").and_then(|v| v.as_u64()).unwrap_or(100).min(MAX_LISTED as u64);
                let snap = shared.snapshot.borrow();
                let list: Vec<Value> = snap.dead_list.iter().take(limit as usize).cloned().collect();
                Ok(
                    json!({ "prefix": prefix, "dead_letters": list, "total": snap.dead_letters, "as_of_ms": snap.at_ms }),
                )
            }
            "purge" => {
                let (js, dead) = (shared.js.clone(), shared.names.dead_stream.clone());
                let weak = Rc::downgrade(&shared);
                tokio::task::spawn_local(async move {
                    let purged = async { js.get_stream(&dead).await.ok()?.purge().await.ok() };
                    match tokio::time::timeout(ASK_TIMEOUT * 5, purged).await {
                        Ok(Some(r)) => {
                            if let Some(s) = weak.upgrade() {
                                s.counters.borrow_mut().purged += r.purged;
                                s.snapshot.borrow_mut().dead_range = (0, 0, u64::MAX);
                            }
                            tracing::info!("queue {prefix}: purged {} dead letters", r.purged)
                        }
                        _ => tracing::warn!("queue {prefix}: the purge of {dead} failed"),
                    }
                });
                Ok(json!({ "prefix": self.prefix, "purged": known, "started": true }))
            }
            "replay" => {
                tokio::task::spawn_local(replay(Rc::downgrade(&shared)));
                Ok(json!({ "prefix": self.prefix, "replayed": known, "started": true }))
            }
            other => Err(ServiceError::new(
                Status::InvalidArgument,
                format!("queue: unknown operation '{other}' (known: dead_letters, purge, replay)"),
            )),
        }
    }
}

/// Publishes every dead letter to the queue's stream again (with fresh
/// attempts and its first id), then deletes it from the dead letters.
async fn replay<A: ServiceApi + 'static>(shared: Weak<Shared<A>>) {
    let Some(s) = shared.upgrade() else { return };
    let (js, names, prefix) = (s.js.clone(), s.names.clone(), s.api.prefix().to_string());
    drop(s);
    let Ok(Ok(mut dead)) = tokio::time::timeout(ASK_TIMEOUT, js.get_stream(&names.dead_stream)).await else {
        return tracing::warn!("queue {prefix}: replay: no stream {}", names.dead_stream);
    };
    let Ok(Ok(info)) = tokio::time::timeout(ASK_TIMEOUT, dead.info()).await else {
        return tracing::warn!("queue {prefix}: replay: {} did not answer", names.dead_stream);
    };
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut n = 0u64;
    for seq in first.max(1)..=last {
        let Ok(Ok(m)) = tokio::time::timeout(ASK_TIMEOUT, dead.get_raw_message(seq)).await else { continue };
        let put = tokio::time::timeout(
            ASK_TIMEOUT,
            publish(&js, names.subject.clone(), HeaderMap::new(), m.payload.to_vec()),
        );
        match put.await {
            Ok(Ok(_)) => {
                let _ = tokio::time::timeout(ASK_TIMEOUT, dead.delete_message(seq)).await;
                n += 1;
            }
            _ => {
                tracing::warn!("queue {prefix}: replay stopped at dead letter {seq}: the queue's stream refused it");
                break;
            }
        }
    }
    if let Some(s) = shared.upgrade() {
        s.counters.borrow_mut().replayed += n;
        s.snapshot.borrow_mut().dead_range = (0, 0, u64::MAX);
    }
    tracing::info!("queue {prefix}: replayed {n} dead letters");
}
