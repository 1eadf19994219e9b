//! The manifests are the architecture: the queue reaches the core through
//! the service API crate only, and none of the three crates under it
//! (service, queue, wal) can name the core's router, HTTP, NATS or
//! WebSocket libraries. The queue's JetStream backend
//! (cumulo-queue-jetstream) is the one queue crate that uses NATS; it too
//! cannot reach the core, its HTTP or WebSocket libraries. Checked on the resolved dependency graph
//! (`cargo metadata`), so a dependency added to a manifest, directly or
//! through another crate, fails here.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

/// Crates a service built on the core must not reach.
const FORBIDDEN: &[&str] = &["cumulo", "cumulo-sdk", "hyper", "async-nats", "tokio-tungstenite", "tungstenite"];

/// name -> names of its normal (not dev, not build) dependencies.
fn graph() -> HashMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(cargo)
        // This platform's graph, from what the build already fetched.
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", env!("TARGET_TRIPLE")])
        .args(["--manifest-path", manifest])
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let name_of: HashMap<&str, &str> = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut g = HashMap::new();
    for node in v["resolve"]["nodes"].as_array().unwrap() {
        let name = name_of[node["id"].as_str().unwrap()].to_string();
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
            .map(|d| name_of[d["pkg"].as_str().unwrap()].to_string())
            .collect();
        g.entry(name).or_insert_with(Vec::new).extend::<Vec<String>>(deps);
    }
    g
}

fn closure(g: &HashMap<String, Vec<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(n) = todo.pop() {
        for d in g.get(&n).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn the_queue_and_what_it_stands_on_cannot_reach_the_core() {
    let g = graph();
    for root in ["cumulo-service", "cumulo-queue", "cumulo-wal"] {
        let reach = closure(&g, root);
        let bad: Vec<&&str> = FORBIDDEN.iter().filter(|f| reach.contains(**f)).collect();
        assert!(bad.is_empty(), "{root} depends on {bad:?}, which the design forbids (docs/ARCHITECTURE.md)");
    }
    let queue = closure(&g, "cumulo-queue");
    assert!(queue.contains("cumulo-service") && queue.contains("cumulo-wal"), "{queue:?}");
    // The service API is the protocol's types and JSON for reports: no runtime.
    let service: Vec<String> = closure(&g, "cumulo-service").into_iter().filter(|d| d.starts_with("cumulo")).collect();
    assert_eq!(service, ["cumulo-proto"]);
    assert!(!closure(&g, "cumulo-wal").iter().any(|d| d.starts_with("cumulo")), "the log knows no cumulo crate");
    // The JetStream backend: NATS, and the queue's shared checks, nothing else of cumulo.
    let js = closure(&g, "cumulo-queue-jetstream");
    let bad: Vec<&&str> = FORBIDDEN.iter().filter(|f| **f != "async-nats" && js.contains(**f)).collect();
    assert!(bad.is_empty(), "cumulo-queue-jetstream depends on {bad:?}, which the design forbids");
    assert!(js.contains("async-nats") && js.contains("cumulo-queue") && js.contains("cumulo-service"), "{js:?}");
    // And the core does use the queue (both backends) through the service API.
    let core = closure(&g, "cumulo");
    assert!(
        core.contains("cumulo-queue") && core.contains("cumulo-queue-jetstream") && core.contains("cumulo-service")
    );
    assert!(core.contains("hyper"), "the graph sees the core's own dependencies");
}
