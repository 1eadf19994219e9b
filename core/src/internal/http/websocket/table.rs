//! Every open WebSocket connection of the core, for the admin API (list per
//! path, close one), the paths' `max_connections` and the Prometheus
//! counters. One table for the whole core (`Core::websockets`, the same
//! `Arc` on every shard): a gateway with WebSocket paths runs on every
//! shard, and a path's limit, the connection ids and the admin listing
//! span them all. Connections add and remove themselves, under the table's
//! lock once each; what a message counts is an atomic with one writer (its
//! connection's thread, or its shard's slot of the table-wide counters), so
//! no message takes a lock or contends for a cache line.

use crate::metrics::PromText;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};
use tokio::sync::Notify;

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

    /// Its place in `ALL`, plus one (0: none), as `Entry::close` stores it.
    fn code(self) -> u8 {
        CloseReason::ALL.iter().position(|&r| r == self).map_or(0, |i| i as u8 + 1)
    }

    fn from_code(code: u8) -> Option<CloseReason> {
        code.checked_sub(1).and_then(|i| CloseReason::ALL.get(i as usize).copied())
    }
}

/// One open connection as the admin API shows it. The connection's task
/// owns the socket; this holds what it counts (written by that task only)
/// and a way to ask it to close, from any thread.
pub struct Entry {
    pub id: u64,
    /// The configured path prefix it was accepted under.
    pub path: Arc<str>,
    /// The URL path it asked for.
    pub url: String,
    pub name: String,
    pub remote: Arc<str>,
    /// The core's thread (shard) it runs on.
    pub shard: u32,
    pub opened: Instant,
    pub opened_at: SystemTime,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub messages_in: AtomicU64,
    pub messages_out: AtomicU64,
    /// `CloseReason::code` of the close asked for, 0 while none.
    close: AtomicU8,
    close_wake: Notify,
}

impl Entry {
    /// Asks the connection to close (it sends a close frame and ends); the
    /// first reason asked for is the one it closes with.
    pub fn close(&self, why: CloseReason) {
        if self.close.compare_exchange(0, why.code(), Relaxed, Relaxed).is_ok() {
            self.close_wake.notify_one();
        }
    }

    /// Resolves once someone asked the connection to close.
    pub async fn close_requested(&self) -> CloseReason {
        loop {
            if let Some(why) = CloseReason::from_code(self.close.load(Relaxed)) {
                return why;
            }
            // notify_one keeps a permit when no one waits: no close is missed.
            self.close_wake.notified().await;
        }
    }
}

/// What the connections of one shard count, by their Prometheus names;
/// the table keeps one per shard (each written by its shard alone) and
/// adds them up when read. Aligned apart, so two shards never share a
/// cache line.
#[derive(Default)]
#[repr(align(128))]
pub struct Counters {
    pub refused: AtomicU64,
    pub messages_in: AtomicU64,
    pub messages_out: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub pushes: AtomicU64,
    pub request_errors: AtomicU64,
}

/// Who a new connection is: its URL path, name, client and shard.
pub struct Place<'a> {
    pub url: String,
    pub name: String,
    pub remote: &'a str,
    pub shard: u32,
}

/// What the lock guards: changed once per connection.
#[derive(Default)]
struct Open {
    by_id: BTreeMap<u64, Arc<Entry>>,
    /// Open connections per configured path (`max_connections`).
    per_path: HashMap<Arc<str>, usize>,
    next_id: u64,
    opened: u64,
    closed: BTreeMap<CloseReason, u64>,
}

pub struct Table {
    open: Mutex<Open>,
    /// One per shard.
    shards: Box<[Counters]>,
}

/// Adds `n` to a counter that only this thread writes: a plain load and
/// store, no locked instruction (readers on other threads see it a moment
/// later, which a counter may).
pub fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl Table {
    /// The table of a core of `shards` threads.
    pub fn new(shards: u32) -> Table {
        Table { open: Mutex::default(), shards: (0..shards.max(1)).map(|_| Counters::default()).collect() }
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // A poisoned lock only means another shard panicked holding it; the
        // table itself is whole (every change is one insert or remove).
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counters shard `shard` writes.
    pub fn counters(&self, shard: u32) -> &Counters {
        &self.shards[shard as usize % self.shards.len()]
    }

    /// Registers a new connection, unless `path` already has `max` open
    /// (None): checked and counted under one lock, so shards accepting at
    /// once never exceed it. Ids start at 1 and are never reused while the
    /// core runs.
    pub fn open(&self, path: &str, max: usize, at: Place<'_>) -> Option<Arc<Entry>> {
        let mut t = self.lock();
        let path: Arc<str> = match t.per_path.get_key_value(path) {
            Some((_, &n)) if n >= max => return None,
            Some((p, _)) => p.clone(),
            None if max == 0 => return None,
            None => Arc::from(path),
        };
        t.next_id += 1;
        t.opened += 1;
        *t.per_path.entry(path.clone()).or_default() += 1;
        let e = Arc::new(Entry {
            id: t.next_id,
            path,
            url: at.url,
            name: at.name,
            remote: Arc::from(at.remote),
            shard: at.shard,
            opened: Instant::now(),
            opened_at: SystemTime::now(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            messages_in: AtomicU64::new(0),
            messages_out: AtomicU64::new(0),
            close: AtomicU8::new(0),
            close_wake: Notify::new(),
        });
        t.by_id.insert(e.id, e.clone());
        Some(e)
    }

    pub fn closed(&self, id: u64, why: CloseReason) {
        let mut t = self.lock();
        if let Some(e) = t.by_id.remove(&id) {
            if let Some(n) = t.per_path.get_mut(&e.path) {
                *n -= 1;
                if *n == 0 {
                    t.per_path.remove(&e.path);
                }
            }
        }
        *t.closed.entry(why).or_default() += 1;
    }

    pub fn get(&self, id: u64) -> Option<Arc<Entry>> {
        self.lock().by_id.get(&id).cloned()
    }

    /// Open connections accepted under `path`.
    pub fn count_on(&self, path: &str) -> usize {
        self.lock().per_path.get(path).copied().unwrap_or(0)
    }

    /// A counter summed over the shards.
    fn total(&self, field: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.shards.iter().map(|c| field(c).load(Relaxed)).fold(0, u64::wrapping_add)
    }

    /// `GET /v1/websockets`: per configured path, its count and bytes, then
    /// its connections (oldest first).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let t = self.lock();
        let mut by_path: BTreeMap<&str, Vec<&Arc<Entry>>> = BTreeMap::new();
        for e in t.by_id.values() {
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
                            "thread": e.shard,
                            "opened_at": unix(e.opened_at),
                            "age_seconds": e.opened.elapsed().as_secs_f64(),
                            "bytes_in": e.bytes_in.load(Relaxed),
                            "bytes_out": e.bytes_out.load(Relaxed),
                            "messages_in": e.messages_in.load(Relaxed),
                            "messages_out": e.messages_out.load(Relaxed),
                        })
                    })
                    .collect();
                json!({
                    "path": path,
                    "count": list.len(),
                    "bytes_in": list.iter().map(|e| e.bytes_in.load(Relaxed)).sum::<u64>(),
                    "bytes_out": list.iter().map(|e| e.bytes_out.load(Relaxed)).sum::<u64>(),
                    "oldest_age_seconds": list.iter().map(|e| e.opened.elapsed().as_secs_f64()).fold(0.0, f64::max),
                    "connections": connections,
                })
            })
            .collect();
        json!({ "count": t.by_id.len(), "paths": paths })
    }

    /// The `cumulo_websocket_*` series of `GET /metrics`.
    pub fn render(&self, p: &mut PromText) {
        let (open, opened, closed) = {
            let t = self.lock();
            (t.by_id.len() as u64, t.opened, t.closed.clone())
        };
        let mut one = |name: &str, kind: &str, help: &str, v: u64| {
            p.header(name, kind, help);
            p.sample(name, &[], v);
        };
        one("cumulo_websocket_connections", "gauge", "WebSocket connections open now.", open);
        one("cumulo_websocket_opened_total", "counter", "WebSocket connections accepted (upgraded).", opened);
        one(
            "cumulo_websocket_refused_total",
            "counter",
            "WebSocket upgrades refused (max_connections of their path, or a bad URL).",
            self.total(|c| &c.refused),
        );
        one(
            "cumulo_websocket_messages_in_total",
            "counter",
            "Messages received from browsers.",
            self.total(|c| &c.messages_in),
        );
        one(
            "cumulo_websocket_messages_out_total",
            "counter",
            "Messages sent to browsers.",
            self.total(|c| &c.messages_out),
        );
        one(
            "cumulo_websocket_bytes_in_total",
            "counter",
            "Message bytes received from browsers.",
            self.total(|c| &c.bytes_in),
        );
        one(
            "cumulo_websocket_bytes_out_total",
            "counter",
            "Message bytes sent to browsers.",
            self.total(|c| &c.bytes_out),
        );
        one(
            "cumulo_websocket_pushes_total",
            "counter",
            "Service requests to a connection's name, pushed to its browser.",
            self.total(|c| &c.pushes),
        );
        one(
            "cumulo_websocket_request_errors_total",
            "counter",
            "Messages in whose service request ended in an error (NO_SERVICE, TIMEOUT, ...).",
            self.total(|c| &c.request_errors),
        );
        p.header("cumulo_websocket_closed_total", "counter", "WebSocket connections closed, by reason.");
        for why in CloseReason::ALL {
            p.sample(
                "cumulo_websocket_closed_total",
                &[("reason", why.name())],
                closed.get(&why).copied().unwrap_or(0),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(name: &str) -> Place<'static> {
        Place { url: format!("/ws/{name}"), name: name.into(), remote: "127.0.0.1:1", shard: 0 }
    }

    #[test]
    fn a_path_holds_max_connections_and_a_closed_one_makes_room() {
        let t = Table::new(2);
        let a = t.open("/ws/", 2, at("a")).unwrap();
        let _b = t.open("/ws/", 2, at("b")).unwrap();
        assert!(t.open("/ws/", 2, at("c")).is_none());
        assert!(t.open("/other/", 2, at("x")).is_some());
        assert_eq!((t.count_on("/ws/"), t.count_on("/other/"), a.id), (2, 1, 1));
        t.closed(a.id, CloseReason::Client);
        assert_eq!(t.count_on("/ws/"), 1);
        assert!(t.open("/ws/", 2, at("c")).is_some());
    }

    #[test]
    fn a_close_asked_keeps_its_first_reason() {
        let t = Table::new(1);
        let e = t.open("/ws/", 1, at("a")).unwrap();
        e.close(CloseReason::Admin);
        e.close(CloseReason::Replaced);
        let why = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(e.close_requested());
        assert_eq!(why, CloseReason::Admin);
        for why in CloseReason::ALL {
            assert_eq!(CloseReason::from_code(why.code()), Some(why));
        }
    }

    #[test]
    fn the_shards_counters_add_up() {
        let t = Table::new(2);
        add(&t.counters(0).pushes, 2);
        add(&t.counters(1).pushes, 3);
        assert_eq!(t.total(|c| &c.pushes), 5);
    }
}
