//! Every open WebSocket connection of the core, for the admin API (list per
//! path, close one) and the Prometheus counters. Lives in the core's state
//! (`Core::websockets`); connections add and remove themselves.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::{Instant, SystemTime};
use tokio::sync::Notify;

thread_local! {
    /// The open WebSocket connections of this shard's HTTP gateways (the
    /// admin API lists and closes them, `/metrics` counts them). A shard is
    /// a thread with one core, so the table is the thread's.
    static SHARED: Rc<Table> = Rc::default();
}

/// This shard's table of open WebSocket connections.
pub fn shared() -> Rc<Table> {
    SHARED.with(Rc::clone)
}

/// Why a connection ended: the disconnect notification's `reason` and the
/// label of `cumulo_websocket_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CloseReason {
    /// The browser closed it (or its TCP connection ended).
    Client,
    /// No frame from the client within `idle_timeout_ms`.
    Idle,
    /// A message or frame over `max_message` / `max_frame` (close 1009).
    TooLarge,
    /// A frame that breaks RFC 6455 (close 1002), or bad UTF-8 (1007).
    Protocol,
    /// The browser did not read what was sent to it (`max_pending`).
    SlowReader,
    /// A newer connection took its name (`unique`).
    Replaced,
    /// Closed through the admin API.
    Admin,
    /// The gateway or the core is stopping (1001).
    Stopping,
}

impl CloseReason {
    pub const ALL: [CloseReason; 8] = [
        CloseReason::Client,
        CloseReason::Idle,
        CloseReason::TooLarge,
        CloseReason::Protocol,
        CloseReason::SlowReader,
        CloseReason::Replaced,
        CloseReason::Admin,
        CloseReason::Stopping,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CloseReason::Client => "client",
            CloseReason::Idle => "idle",
            CloseReason::TooLarge => "too_large",
            CloseReason::Protocol => "protocol",
            CloseReason::SlowReader => "slow_reader",
            CloseReason::Replaced => "replaced",
            CloseReason::Admin => "admin",
            CloseReason::Stopping => "stopping",
        }
    }
}

/// One open connection as the admin API shows it. The connection's task
/// owns the socket; this holds what it counts and a way to ask it to close.
pub struct Entry {
    pub id: u64,
    /// The configured path prefix it was accepted under.
    pub path: Rc<str>,
    /// The URL path it asked for.
    pub url: String,
    pub name: String,
    pub remote: Rc<str>,
    pub opened: Instant,
    pub opened_at: SystemTime,
    pub bytes_in: Cell<u64>,
    pub bytes_out: Cell<u64>,
    pub messages_in: Cell<u64>,
    pub messages_out: Cell<u64>,
    close: Cell<Option<CloseReason>>,
    close_wake: Notify,
}

impl Entry {
    /// Asks the connection to close (it sends a close frame and ends).
    pub fn close(&self, why: CloseReason) {
        if self.close.get().is_none() {
            self.close.set(Some(why));
            self.close_wake.notify_one();
        }
    }

    /// Resolves once someone asked the connection to close.
    pub async fn close_requested(&self) -> CloseReason {
        loop {
            if let Some(why) = self.close.get() {
                return why;
            }
            self.close_wake.notified().await;
        }
    }
}

/// Core-wide counters, by their Prometheus names.
#[derive(Default)]
pub struct Counters {
    pub opened: Cell<u64>,
    pub refused: Cell<u64>,
    /// Of `refused`: those from a page whose Origin the path does not accept.
    pub origin_refused: Cell<u64>,
    pub messages_in: Cell<u64>,
    pub messages_out: Cell<u64>,
    pub bytes_in: Cell<u64>,
    pub bytes_out: Cell<u64>,
    pub pushes: Cell<u64>,
    pub request_errors: Cell<u64>,
    closed: RefCell<BTreeMap<CloseReason, u64>>,
}

#[derive(Default)]
pub struct Table {
    open: RefCell<BTreeMap<u64, Rc<Entry>>>,
    next_id: Cell<u64>,
    pub counters: Counters,
}

pub fn add(c: &Cell<u64>, n: u64) {
    c.set(c.get().wrapping_add(n));
}

impl Table {
    /// Registers a new connection; ids start at 1 and are never reused
    /// while the core runs.
    pub fn open(&self, path: Rc<str>, url: String, name: String, remote: Rc<str>) -> Rc<Entry> {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let e = Rc::new(Entry {
            id,
            path,
            url,
            name,
            remote,
            opened: Instant::now(),
            opened_at: SystemTime::now(),
            bytes_in: Cell::new(0),
            bytes_out: Cell::new(0),
            messages_in: Cell::new(0),
            messages_out: Cell::new(0),
            close: Cell::new(None),
            close_wake: Notify::new(),
        });
        self.open.borrow_mut().insert(id, e.clone());
        add(&self.counters.opened, 1);
        e
    }

    pub fn closed(&self, id: u64, why: CloseReason) {
        self.open.borrow_mut().remove(&id);
        *self.counters.closed.borrow_mut().entry(why).or_default() += 1;
    }

    pub fn get(&self, id: u64) -> Option<Rc<Entry>> {
        self.open.borrow().get(&id).cloned()
    }

    /// Open connections accepted under `path`.
    pub fn count_on(&self, path: &str) -> usize {
        self.open.borrow().values().filter(|e| &*e.path == path).count()
    }

    /// `GET /v1/websockets`: per configured path, its count and bytes, then
    /// its connections (oldest first).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let open = self.open.borrow();
        let mut by_path: BTreeMap<&str, Vec<&Rc<Entry>>> = BTreeMap::new();
        for e in open.values() {
            by_path.entry(&e.path).or_default().push(e);
        }
        let unix = |t: SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let paths: Vec<serde_json::Value> = by_path
            .into_iter()
            .map(|(path, list)| {
                let connections: Vec<serde_json::Value> = list
                    .iter()
                    .map(|e| {
                        json!({
                            "id": e.id,
                            "url": e.url,
                            "name": e.name,
                            "remote_addr": &*e.remote,
                            "opened_at": unix(e.opened_at),
                            "age_seconds": e.opened.elapsed().as_secs_f64(),
                            "bytes_in": e.bytes_in.get(),
                            "bytes_out": e.bytes_out.get(),
                            "messages_in": e.messages_in.get(),
                            "messages_out": e.messages_out.get(),
                        })
                    })
                    .collect();
                json!({
                    "path": path,
                    "count": list.len(),
                    "bytes_in": list.iter().map(|e| e.bytes_in.get()).sum::<u64>(),
                    "bytes_out": list.iter().map(|e| e.bytes_out.get()).sum::<u64>(),
                    "oldest_age_seconds": list.iter().map(|e| e.opened.elapsed().as_secs_f64()).fold(0.0, f64::max),
                    "connections": connections,
                })
            })
            .collect();
        json!({ "count": open.len(), "paths": paths })
    }

    /// The `cumulo_websocket_*` series of `GET /metrics`.
    /// The `cumulo_websocket_*` series of `GET /metrics`, in Prometheus'
    /// text format (no label here needs escaping).
    pub fn render(&self, out: &mut String) {
        let c = &self.counters;
        let mut one = |name: &str, kind: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        };
        one(
            "cumulo_websocket_connections",
            "gauge",
            "WebSocket connections open now.",
            self.open.borrow().len() as u64,
        );
        one("cumulo_websocket_opened_total", "counter", "WebSocket connections accepted (upgraded).", c.opened.get());
        one(
            "cumulo_websocket_refused_total",
            "counter",
            "WebSocket upgrades refused (max_connections of their path, a bad URL, or their Origin).",
            c.refused.get(),
        );
        one(
            "cumulo_websocket_origin_refused_total",
            "counter",
            "WebSocket upgrades refused (403) because their path does not accept the page's Origin.",
            c.origin_refused.get(),
        );
        one("cumulo_websocket_messages_in_total", "counter", "Messages received from browsers.", c.messages_in.get());
        one("cumulo_websocket_messages_out_total", "counter", "Messages sent to browsers.", c.messages_out.get());
        one("cumulo_websocket_bytes_in_total", "counter", "Message bytes received from browsers.", c.bytes_in.get());
        one("cumulo_websocket_bytes_out_total", "counter", "Message bytes sent to browsers.", c.bytes_out.get());
        one(
            "cumulo_websocket_pushes_total",
            "counter",
            "Service requests to a connection's name, pushed to its browser.",
            c.pushes.get(),
        );
        one(
            "cumulo_websocket_request_errors_total",
            "counter",
            "Messages in whose service request ended in an error (NO_SERVICE, TIMEOUT, ...).",
            c.request_errors.get(),
        );
        let name = "cumulo_websocket_closed_total";
        let _ = writeln!(out, "# HELP {name} WebSocket connections closed, by reason.\n# TYPE {name} counter");
        let closed = c.closed.borrow();
        for why in CloseReason::ALL {
            let n = closed.get(&why).copied().unwrap_or(0);
            let _ = writeln!(out, "{name}{{reason=\"{}\"}} {n}", why.name());
        }
    }
}
