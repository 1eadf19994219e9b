//! A node of a test cloud: a core with a `[cluster]` section on given NATS
//! servers, fast heartbeats, its own admin port.

use cumulo_e2e::*;
use std::time::{Duration, Instant};

/// Heartbeat and purge of the test clouds, ms: fast, so that joins and
/// losses show within a test's time.
pub const HEARTBEAT_MS: u32 = CLUSTER_HEARTBEAT_MS;
pub const PURGE_MS: u32 = 1000;

/// The config of node `name` (node_id `id`) of cloud `cloud`.
pub fn node_in(cloud: &str, servers: &[String], name: &str, id: u32) -> Config {
    node_purging_after(cloud, servers, name, id, PURGE_MS)
}

/// As `node_in`, purging a node silent for `purge_ms` (instead of `PURGE_MS`).
pub fn node_purging_after(cloud: &str, servers: &[String], name: &str, id: u32, purge_ms: u32) -> Config {
    cluster_node(cloud, servers, name, id, purge_ms)
}

pub fn node(servers: &[String], name: &str, id: u32) -> Config {
    node_in("test", servers, name, id)
}

/// A test_service under `prefix` whose answers carry `tag` (the node's name).
#[macro_export]
macro_rules! tagged {
    ($prefix:expr, $tag:expr) => {
        cumulo_e2e::ts!($prefix).env("TS_TAG", $tag)
    };
}

/// Sends to `name` until it answers (another node's subscription arrived),
/// within `limit`; returns the first answer.
pub fn wait_reachable(api: &mut Api, name: &str, limit: Duration) -> Response {
    let end = Instant::now() + limit;
    loop {
        match api.send_sync(name, b"", b"probe", opts(1000)) {
            Ok(r) => return r,
            Err(e) if Instant::now() < end => {
                let _ = e;
                std::thread::sleep(ms(20));
            }
            Err(e) => panic!("{name} not reachable within {limit:?}: {e}"),
        }
    }
}

/// The admin port a node's config was given.
pub fn admin_port(cfg: &Config) -> u16 {
    let text = cfg.render("x");
    let at = text.find("[admin]").unwrap();
    text[at..].lines().find_map(|l| l.strip_prefix("port = ")).unwrap().trim().parse().unwrap()
}

/// Waits until `core` logged that `node` joined, then for its snapshot
/// (sent at once on a join's first heartbeat, so three heartbeats suffice).
pub fn wait_joined(core: &Core, node: &str) {
    core.wait_lines(&[&format!("node {node} joined")], 1, ms(10_000));
    std::thread::sleep(ms(3 * HEARTBEAT_MS as u64));
}
