//! What operators see of a queue: `GET /v1/queues`, `cumulo queues`, the
//! dashboard's panel, `/metrics`; and what they can do: list, replay and
//! purge dead letters.

use crate::service::{status_name, Shared};
use crate::settings::{Mode, Sync};
use crate::store::now_ms;
use cumulo_service::{Metric, MetricKind, Report, ServiceApi, ServiceError, Status};
use serde_json::json;
use std::rc::{Rc, Weak};

/// Dead letters listed at most in one answer.
const MAX_LISTED: usize = 1000;

pub(crate) struct QueueReport<A: ServiceApi> {
    shared: Weak<Shared<A>>,
    prefix: String,
}

impl<A: ServiceApi> QueueReport<A> {
    pub fn new(shared: &Rc<Shared<A>>) -> QueueReport<A> {
        QueueReport { shared: Rc::downgrade(shared), prefix: shared.api.prefix().to_string() }
    }

    fn shared(&self) -> Result<Rc<Shared<A>>, ServiceError> {
        self.shared.upgrade().ok_or_else(|| ServiceError::new(Status::ShuttingDown, "the queue stopped"))
    }
}

impl<A: ServiceApi + 'static> Report for QueueReport<A> {
    fn kind(&self) -> &'static str {
        "queue"
    }

    fn id(&self) -> String {
        self.prefix.clone()
    }

    fn view(&self) -> serde_json::Value {
        let Ok(shared) = self.shared() else { return json!({ "prefix": self.prefix, "running": false }) };
        let s = &shared.settings;
        let store = shared.store.borrow();
        let c = store.counters;
        let log = store.log().stats();
        let oldest_age_ms = store.oldest_arrival().map(|t| now_ms().saturating_sub(t));
        json!({
            "prefix": self.prefix,
            "running": true,
            "backend": "file",
            "dir": s.dir.display().to_string(),
            "mode": match s.mode { Mode::Destination => "destination", Mode::Accepted => "accepted" },
            "sync": match s.sync { Sync::Always => "always".to_string(), Sync::Interval(d) => format!("interval {} ms", d.as_millis()), Sync::Never => "never".to_string() },
            "depth": store.depth(),
            "in_flight": store.in_flight(),
            "dead_letters": store.dead_count(),
            "messages": store.len(),
            "max_messages": s.max_messages,
            "bytes_held": store.bytes_held(),
            "bytes_on_disk": log.bytes_on_disk(),
            "max_bytes": s.max_bytes,
            "segments": log.segments(),
            "oldest_age_ms": oldest_age_ms,
            "enqueued": c.enqueued,
            "duplicates": c.duplicates,
            "refused_full": c.refused_full,
            "delivered": c.delivered,
            "answered_error": c.answered_error,
            "redelivered": c.retried,
            "dead_lettered": c.dead_lettered,
            "dropped": c.dropped,
            "expired": c.expired,
            "replayed": c.replayed,
            "purged": c.purged,
            "recovered": c.recovered,
            "records": log.records_appended(),
            "syncs": log.syncs(),
        })
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        let Ok(shared) = self.shared() else { return };
        let store = shared.store.borrow();
        let c = store.counters;
        let log = store.log().stats();
        let label = || vec![("queue", self.prefix.clone())];
        let mut put = |name, help, kind, value: f64| out.push(Metric { name, help, kind, labels: label(), value });
        use MetricKind::{Counter, Gauge};
        put(
            "queue_waiting",
            "Requests of the queue service waiting for delivery (ready or delayed).",
            Gauge,
            store.depth() as f64,
        );
        put("queue_in_flight", "Deliveries in progress.", Gauge, store.in_flight() as f64);
        put("queue_dead_letters", "Dead letters kept for replay.", Gauge, store.dead_count() as f64);
        put("queue_bytes_on_disk", "Bytes of the queue's log on disk.", Gauge, log.bytes_on_disk() as f64);
        let age = store.oldest_arrival().map(|t| now_ms().saturating_sub(t)).unwrap_or(0);
        put("queue_oldest_age_seconds", "Age of the oldest request not delivered.", Gauge, age as f64 / 1000.0);
        put("queue_enqueued_total", "Requests stored and acknowledged.", Counter, c.enqueued as f64);
        put("queue_delivered_total", "Requests delivered and answered OK.", Counter, c.delivered as f64);
        put("queue_redelivered_total", "Attempts after a failed one.", Counter, c.retried as f64);
        put("queue_dead_lettered_total", "Requests out of attempts or time.", Counter, c.dead_lettered as f64);
        put("queue_dropped_total", "Dead letters dropped (max_dead_letters).", Counter, c.dropped as f64);
        put("queue_duplicates_total", "Requests not stored again (idempotency-key).", Counter, c.duplicates as f64);
        put("queue_refused_total", "Requests refused with QUEUE_FULL.", Counter, c.refused_full as f64);
        put("queue_syncs_total", "fdatasync calls of the queue's log.", Counter, log.syncs() as f64);
    }

    fn operate(&self, op: &str, args: &serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        let shared = self.shared()?;
        match op {
            "dead_letters" => {
                let limit = args.get("limit").and_then(|v| v.as_u64()).unwrap_or(100).min(MAX_LISTED as u64);
                let store = shared.store.borrow();
                let list: Vec<_> = store
                    .dead_letters(limit as usize)
                    .into_iter()
                    .map(|d| {
                        json!({
                            "id": d.id,
                            "destination": d.destination,
                            "arrived_ms": d.arrived_ms,
                            "attempts": d.attempts,
                            "bytes": d.request.len(),
                            "history": d.history.iter().map(|f| json!({
                                "attempt": f.attempt, "at_ms": f.at_ms, "status": status_name(f.status)
                            })).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                Ok(json!({ "prefix": self.prefix, "dead_letters": list, "total": store.dead_count() }))
            }
            "purge" => {
                let n = shared.store.borrow_mut().purge();
                tracing::info!("queue {}: purged {n} dead letters", self.prefix);
                Ok(json!({ "prefix": self.prefix, "purged": n }))
            }
            "replay" => {
                let n = shared.store.borrow_mut().replay();
                shared.wake.notify_one();
                tracing::info!("queue {}: replaying {n} dead letters", self.prefix);
                Ok(json!({ "prefix": self.prefix, "replayed": n }))
            }
            other => Err(ServiceError::new(
                Status::InvalidArgument,
                format!("queue: unknown operation '{other}' (known: dead_letters, purge, replay)"),
            )),
        }
    }
}
