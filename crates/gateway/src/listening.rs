//! What the shards that serve one gateway address share. With
//! `core.threads` > 1 every shard runs the gateway on the same port: the
//! open connections are counted together, so that `max_connections` bounds
//! the gateway, not each shard; and the gateway is logged as one: its
//! listening line by the first shard to start, its stop line by the last to
//! stop, with the requests of every shard summed. Touched once per
//! connection and once per shard's start and stop, never per request.

use super::gateway::Counts;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, OnceLock, Weak};

#[derive(Default)]
pub struct Listening {
    pub open: Arc<AtomicUsize>,
    addr: Option<SocketAddr>,
    /// `http` or `https`, for the log lines.
    scheme: &'static str,
    totals: Mutex<Totals>,
}

/// Requests answered by status class (index 1 .. 5) and connections refused,
/// of the shards that stopped so far; `shards`: those still serving.
#[derive(Default, Clone, Copy)]
struct Totals {
    shards: usize,
    by_class: [u64; 6],
    refused: u64,
    tls_failures: u64,
}

/// Joins the gateway listening on `addr` (`None`: a listener of its own);
/// the first shard logs that it listens.
pub fn join(addr: Option<SocketAddr>, scheme: &'static str) -> Arc<Listening> {
    static ALL: OnceLock<Mutex<HashMap<SocketAddr, Weak<Listening>>>> = OnceLock::new();
    let Some(a) = addr else {
        return Arc::new(Listening { totals: Mutex::new(one_shard()), scheme, ..Listening::default() });
    };
    let mut all = ALL.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|_, l| l.strong_count() > 0);
    if let Some(l) = all.get(&a).and_then(Weak::upgrade) {
        l.totals.lock().unwrap_or_else(|e| e.into_inner()).shards += 1;
        return l;
    }
    tracing::info!("http: gateway listening on {scheme}://{a}");
    let l = Arc::new(Listening { addr, scheme, totals: Mutex::new(one_shard()), ..Listening::default() });
    all.insert(a, Arc::downgrade(&l));
    l
}

fn one_shard() -> Totals {
    Totals { shards: 1, ..Totals::default() }
}

impl Listening {
    /// A shard stops serving: its counts join the others'; the last one
    /// logs the gateway's stop with them all.
    pub fn leave(&self, counts: &Counts) {
        let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
        for (sum, n) in t.by_class.iter_mut().zip(&counts.by_class) {
            *sum += n.get();
        }
        t.refused += counts.refused_connections.get();
        t.tls_failures += counts.tls_handshake_failures.get();
        t.shards = t.shards.saturating_sub(1);
        if t.shards > 0 {
            return;
        }
        let c = t.by_class;
        let on = self.addr.map(|a| format!(" on {}://{a}", self.scheme)).unwrap_or_default();
        let tls =
            if self.scheme == "https" { format!(", {} TLS handshakes failed", t.tls_failures) } else { String::new() };
        tracing::info!(
            "http: gateway{on} stopped accepting connections; so far {} requests (2xx {}, 3xx {}, 4xx {}, 5xx {}), {} connections refused over max_connections{tls}",
            c.iter().sum::<u64>(),
            c[2],
            c[3],
            c[4],
            c[5],
            t.refused
        );
    }
}
