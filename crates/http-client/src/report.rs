//! What operators see of an `http_client` instance: requests by outcome,
//! answers by status class, the pool's connections (`/metrics`, and the
//! report's JSON view).

use crate::client::{Answer, Client};
use crate::error::{Error, ErrorKind};
use cumulo_service::{Metric, MetricKind, Report, ServiceError, Status};
use serde_json::json;
use std::cell::Cell;
use std::rc::Weak;

/// Counts of one client, kept on its thread.
#[derive(Default)]
pub struct Counters {
    pub requests: Cell<u64>,
    pub in_flight: Cell<u64>,
    /// Answers by status class: 1xx .. 5xx.
    pub answered: [Cell<u64>; 5],
    pub failed: [Cell<u64>; ErrorKind::ALL.len()],
    pub redirects: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

impl Counters {
    pub fn count(&self, result: &Result<Answer, Error>) {
        bump(&self.requests);
        match result {
            Ok(a) => bump(&self.answered[(a.status / 100).clamp(1, 5) as usize - 1]),
            Err(e) => bump(&self.failed[e.kind().index()]),
        }
    }

    /// A request refused before it was sent (a bad URL, ...).
    pub fn refused(&self, e: &Error) {
        bump(&self.requests);
        bump(&self.failed[e.kind().index()]);
    }
}

pub struct ClientReport {
    pub client: Weak<Client>,
    pub prefix: String,
    pub process: u32,
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

impl Report for ClientReport {
    fn kind(&self) -> &'static str {
        "http_client"
    }

    fn id(&self) -> String {
        format!("{}#{}", self.prefix, self.process)
    }

    fn view(&self) -> serde_json::Value {
        let Some(client) = self.client.upgrade() else { return json!({ "prefix": self.prefix, "running": false }) };
        let (c, pool) = (&client.counters, client.pool());
        let answered: serde_json::Map<_, _> =
            CLASSES.iter().zip(&c.answered).map(|(k, v)| (k.to_string(), json!(v.get()))).collect();
        let failed: serde_json::Map<_, _> =
            ErrorKind::ALL.iter().zip(&c.failed).map(|(k, v)| (k.name().to_string(), json!(v.get()))).collect();
        let idle: serde_json::Map<_, _> = pool.idle_by_origin().into_iter().map(|(o, n)| (o, json!(n))).collect();
        json!({
            "prefix": self.prefix,
            "process": self.process,
            "running": true,
            "requests": c.requests.get(),
            "in_flight": c.in_flight.get(),
            "answered": answered,
            "failed": failed,
            "redirects_followed": c.redirects.get(),
            "connections_open": pool.open_count(),
            "connections_idle": pool.idle_count(),
            "max_connections": pool.max_connections(),
            "max_connections_per_host": pool.max_connections_per_host(),
            "connections_opened": pool.opened(),
            "connections_reused": pool.reuses(),
            "idle_by_origin": idle,
        })
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        let Some(client) = self.client.upgrade() else { return };
        let (c, pool) = (&client.counters, client.pool());
        let base = || vec![("service", self.prefix.clone()), ("process", self.process.to_string())];
        let with = |k: &'static str, v: &str| {
            let mut l = base();
            l.push((k, v.to_string()));
            l
        };
        use MetricKind::{Counter, Gauge};
        for (class, n) in CLASSES.iter().zip(&c.answered) {
            out.push(Metric {
                name: "http_client_answers_total",
                help: "Requests of the http_client service answered by their server, by HTTP status class.",
                kind: Counter,
                labels: with("class", class),
                value: n.get() as f64,
            });
        }
        for (kind, n) in ErrorKind::ALL.iter().zip(&c.failed) {
            out.push(Metric {
                name: "http_client_failures_total",
                help: "Requests of the http_client service that ended without an answer, by cause.",
                kind: Counter,
                labels: with("error", kind.name()),
                value: n.get() as f64,
            });
        }
        let mut put =
            |name, help, kind, value: u64| out.push(Metric { name, help, kind, labels: base(), value: value as f64 });
        put("http_client_in_flight", "Requests of the http_client service in progress.", Gauge, c.in_flight.get());
        put(
            "http_client_connections_open",
            "Open connections of the http_client pool, idle or busy.",
            Gauge,
            pool.open_count() as u64,
        );
        put(
            "http_client_connections_idle",
            "Idle keep-alive connections of the http_client pool.",
            Gauge,
            pool.idle_count() as u64,
        );
        put(
            "http_client_connections_opened_total",
            "Connections the http_client service opened.",
            Counter,
            pool.opened(),
        );
        put(
            "http_client_connections_reused_total",
            "Requests sent on a kept-alive connection.",
            Counter,
            pool.reuses(),
        );
    }

    fn operate(&self, op: &str, _args: &serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        Err(ServiceError::new(Status::InvalidArgument, format!("http_client: no operation '{op}'")))
    }
}
