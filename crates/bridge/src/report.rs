//! What operators see of a bridge instance: its counters as a report (kind
//! `bridge`) for the admin API and `/metrics` (`cumulo_bridge_*`, labelled
//! by the bridge's prefix, its protocol and the instance).

use cumulo_service::{Metric, MetricKind, Report, ServiceError, Status};
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The counters of one instance; only its own tasks touch them.
#[derive(Default)]
pub struct Counters {
    /// Connections open now (tcp).
    pub open: Cell<u64>,
    pub accepted: Cell<u64>,
    /// Connections refused at `max_connections` (tcp).
    pub refused: Cell<u64>,
    /// Messages sent on as requests.
    pub messages: Cell<u64>,
    /// Answers written back with the service's body.
    pub answers: Cell<u64>,
    /// Datagrams dropped at `max_in_flight` (udp).
    pub dropped: Cell<u64>,
    /// Refused input, closes, and failed requests, by kind.
    errors: RefCell<BTreeMap<&'static str, u64>>,
}

impl Counters {
    pub fn add(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }

    pub fn error(&self, kind: &'static str) {
        *self.errors.borrow_mut().entry(kind).or_default() += 1;
    }

    /// A request that ended in `status` (not OK): its kind is the status's
    /// name in lower case (`timeout`, `no_service`, ...).
    pub fn failed(&self, status: Status) {
        self.error(status_kind(status));
    }
}

pub fn status_kind(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Timeout => "timeout",
        Status::NoService => "no_service",
        Status::QueueFull => "queue_full",
        Status::Crashed => "crashed",
        Status::Malformed => "malformed",
        Status::ShuttingDown => "shutting_down",
        Status::ServiceError => "service_error",
        Status::TooLarge => "too_large",
        Status::InvalidArgument => "invalid_argument",
        Status::UnsupportedVersion => "unsupported_version",
        Status::Unauthorized => "unauthorized",
        Status::Protocol => "protocol",
        Status::Unavailable => "unavailable",
        Status::Other(_) => "other_status",
    }
}

thread_local! {
    /// The instance numbers in use per bridge prefix on this thread: the
    /// lowest free one is taken, so the `instance` label stays small and
    /// stable across restarts.
    static SLOTS: RefCell<HashMap<String, BTreeSet<u32>>> = RefCell::default();
}

/// An instance's number among its bridge's, given back on drop.
pub struct Slot {
    prefix: String,
    pub index: u32,
}

impl Slot {
    pub fn take(prefix: &str) -> Slot {
        SLOTS.with(|s| {
            let mut all = s.borrow_mut();
            let used = all.entry(prefix.to_string()).or_default();
            let index = (0..).find(|i| !used.contains(i)).unwrap_or(0);
            used.insert(index);
            Slot { prefix: prefix.to_string(), index }
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SLOTS.with(|s| {
            if let Some(used) = s.borrow_mut().get_mut(&self.prefix) {
                used.remove(&self.index);
            }
        });
    }
}

pub struct BridgeReport {
    pub protocol: &'static str,
    pub prefix: String,
    pub address: String,
    pub dest: String,
    pub slot: Slot,
    pub counters: std::rc::Rc<Counters>,
}

impl Report for BridgeReport {
    fn kind(&self) -> &'static str {
        "bridge"
    }

    fn id(&self) -> String {
        format!("{}#{}", self.prefix, self.slot.index)
    }

    fn view(&self) -> serde_json::Value {
        let c = &self.counters;
        json!({
            "prefix": self.prefix,
            "instance": self.slot.index,
            "protocol": self.protocol,
            "address": self.address,
            "dest": self.dest,
            "connections_open": c.open.get(),
            "connections_accepted": c.accepted.get(),
            "connections_refused": c.refused.get(),
            "messages": c.messages.get(),
            "answers": c.answers.get(),
            "dropped": c.dropped.get(),
            "errors": *c.errors.borrow(),
        })
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        let c = &self.counters;
        let labels = || {
            vec![
                ("bridge", self.prefix.clone()),
                ("protocol", self.protocol.to_string()),
                ("instance", self.slot.index.to_string()),
            ]
        };
        let mut put =
            |name, help, kind, value: u64| out.push(Metric { name, help, kind, labels: labels(), value: value as f64 });
        use MetricKind::{Counter, Gauge};
        put("bridge_messages_total", "Messages a bridge sent on as requests.", Counter, c.messages.get());
        put("bridge_answers_total", "Answers a bridge wrote back with the service's body.", Counter, c.answers.get());
        if self.protocol == "tcp" {
            put("bridge_connections_open", "Connections a tcp bridge holds open.", Gauge, c.open.get());
            put("bridge_connections_accepted_total", "Connections a tcp bridge accepted.", Counter, c.accepted.get());
            put(
                "bridge_connections_refused_total",
                "Connections a tcp bridge refused at max_connections.",
                Counter,
                c.refused.get(),
            );
        } else {
            put("bridge_dropped_total", "Datagrams a udp bridge dropped at max_in_flight.", Counter, c.dropped.get());
        }
        for (kind, n) in c.errors.borrow().iter() {
            let mut labels = labels();
            labels.push(("kind", kind.to_string()));
            out.push(Metric {
                name: "bridge_errors_total",
                help: "Input a bridge refused, connections it closed, and requests that failed, by kind.",
                kind: Counter,
                labels,
                value: *n as f64,
            });
        }
    }

    fn operate(&self, op: &str, _args: &serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        Err(ServiceError::new(Status::InvalidArgument, format!("a bridge has no operation '{op}'")))
    }
}
