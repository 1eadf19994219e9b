//! One view of every shard: with `core.threads = 2` the HTTP gateway runs on
//! both shards, and `/v1/status`, `/metrics`, `/v1/stats` and the service
//! views count the requests both took, each once; with one thread they
//! answer as they always did.

use crate::common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const SERVICES: &str = "[[service]]\nprefix = \"/\"\ninternal = \"http\"\n[service.settings]\nport = PORT\n\n[[service]]\nprefix = \"/echo/\"\ninternal = \"echo\"\n";

/// One request on a connection of its own (the kernel spreads new
/// connections among the shards); its status.
fn get(port: u16, path: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

fn shard_requests(status: &Value) -> Vec<u64> {
    status["shards"].as_array().unwrap().iter().map(|s| s["requests"].as_u64().unwrap()).collect()
}

fn check(threads: u32) {
    let port = free_port();
    let core = TestCore::start_threads(&SERVICES.replace("PORT", &port.to_string()), threads);
    // The gateway: one instance on each shard.
    core.wait_running(1, threads as u64);
    core.wait_running(2, 1);
    let mut sent = 0u64;
    // Until every shard took some (each batch of new connections is spread
    // anew by the kernel).
    loop {
        for _ in 0..20 {
            assert_eq!(get(port, "/echo/x"), 200);
            sent += 1;
        }
        let status = core.get("/v1/status");
        if shard_requests(&status).iter().all(|n| *n > 0) || sent >= 400 {
            break;
        }
    }
    let status = core.get("/v1/status");
    let share = shard_requests(&status);
    assert_eq!(share.len(), threads as usize, "{status}");
    assert!(share.iter().all(|n| *n > 0), "every shard took some requests: {share:?} of {sent}");
    assert_eq!(share.iter().sum::<u64>(), sent, "{status}");
    assert_eq!(status["shards_missing"], serde_json::json!([]));
    assert_eq!(status["totals"]["requests"], sent, "{status}");
    assert_eq!(status["totals"]["responses"], sent, "{status}");
    assert_eq!(status["requests_in_flight"], 0, "{status}");
    // Per shard: the gateway's instance on each, the echo on shard 0.
    assert_eq!(status["instances"], 1 + threads as u64, "{status}");

    let metrics = core.http("GET", "/metrics", None).body;
    let m = |s: &str| metric_in(&metrics, s).unwrap_or_else(|| panic!("{s} missing:\n{metrics}")) as u64;
    assert_eq!(m("cumulo_requests_received_total{service=\"/echo/\",service_id=\"2\"}"), sent);
    assert_eq!(m("cumulo_requests_sent_total{service=\"/\",service_id=\"1\"}"), sent);
    assert_eq!(m("cumulo_responses_total{service=\"/echo/\",service_id=\"2\",status=\"OK\"}"), sent);
    assert_eq!(m("cumulo_request_duration_seconds_count{service=\"/echo/\",service_id=\"2\"}"), sent);
    assert_eq!(m("cumulo_instances_up{service=\"/\",service_id=\"1\"}"), threads as u64);
    assert_eq!(m("cumulo_connections"), 1 + threads as u64);
    let per_shard: Vec<u64> =
        (0..threads).map(|i| m(&format!("cumulo_shard_requests_total{{shard=\"{i}\"}}"))).collect();
    assert_eq!(per_shard, share);
    assert!((0..threads).all(|i| m(&format!("cumulo_shard_up{{shard=\"{i}\"}}")) == 1));

    let stats = core.get("/v1/stats");
    assert_eq!(stats["requests"], sent, "{stats}");
    let echo = stats["services"].as_array().unwrap().iter().find(|s| s["id"] == 2).unwrap().clone();
    assert_eq!((echo["received"].as_u64(), echo["handled"].as_u64()), (Some(sent), Some(sent)), "{echo}");
    let buckets: u64 = echo["duration_buckets"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap()).sum();
    assert_eq!(buckets, sent);

    let gateway = core.get("/v1/services/1");
    assert_eq!(gateway["requests"]["sent"], sent, "{gateway}");
    assert_eq!(gateway["instances"], threads as u64, "{gateway}");
    let list = core.get("/v1/services");
    let echo = list["services"].as_array().unwrap().iter().find(|s| s["id"] == 2).unwrap().clone();
    assert_eq!(echo["requests_handled"], sent, "{list}");
}

#[test]
fn with_two_threads_every_view_counts_the_requests_of_both_shards_once() {
    check(2);
}

#[test]
fn with_one_thread_the_views_count_as_before() {
    check(1);
}
