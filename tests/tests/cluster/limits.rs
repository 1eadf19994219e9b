//! What a node that goes silent can make another node hold: the
//! pseudo-instance standing for it takes 1024 requests in flight (its
//! window), then queues `config::NODE_QUEUE_LIMIT` more; the next request
//! is refused with `QUEUE_FULL` at once, not held.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;
use std::time::Instant;

/// The window of another node's pseudo-instance (`config::MAX_WINDOW`).
const WINDOW: usize = 1024;
/// Requests queued here for another node (`config::NODE_QUEUE_LIMIT`).
const NODE_QUEUE_LIMIT: usize = 65_536;

/// Sends SIGCONT on drop: a node this test stopped never outlives it stopped.
struct Resume<'a>(&'a Core);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

#[test]
fn requests_for_a_stopped_node_queue_up_to_the_limit_then_get_queue_full_at_once() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b")));
    // a purges a silent node only after a minute: the test ends well before.
    let a_cfg = node_purging_after("test", &urls, "a", 1, 60_000);
    let a = Core::start(a_cfg.clone());
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));

    // b hangs: its connections stay open, it reads and answers nothing.
    b.signal(libc::SIGSTOP);
    let _resume = Resume(&b);
    let t0 = Instant::now();
    for _ in 0..WINDOW + NODE_QUEUE_LIMIT {
        api.send_async("/b/x", b"", b"", opts(120_000));
    }
    // Every one of them is held, delivered to b or queued for it, as a's
    // admin API counts them; none is answered (QUEUE_FULL included).
    let port = admin_port(&a_cfg);
    let held = |api: &mut Api| {
        if let Some((_, r)) = api.recv_async(None, ms(50)).unwrap() {
            panic!("a request within the limit was answered at once: {r:?}");
        }
        let nodes: serde_json::Value = serde_json::from_str(&admin_get(port, "/v1/nodes")).unwrap();
        let b = nodes["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "b").expect("node b listed").clone();
        (b["requests_in_flight"].as_u64().unwrap(), b["requests_queued"].as_u64().unwrap())
    };
    let end = Instant::now() + ms(20_000);
    loop {
        let (in_flight, queued) = held(&mut api);
        if (in_flight, queued) == (WINDOW as u64, NODE_QUEUE_LIMIT as u64) {
            break;
        }
        assert!(Instant::now() < end, "held for b: {in_flight} in flight, {queued} queued");
    }
    let holding = t0.elapsed();

    // The next one is refused at once.
    let t = Instant::now();
    let refused = api.send_sync("/b/x", b"", b"one too many", opts(10_000));
    let took = t.elapsed();
    match &refused {
        Err(Error::Status { status: Status::QueueFull, message }) => {
            assert!(
                message.contains("node b") && message.contains(&format!("{NODE_QUEUE_LIMIT} requests")),
                "{message}"
            )
        }
        other => panic!("expected QUEUE_FULL, got {other:?}"),
    }
    assert!(took < ms(1000), "QUEUE_FULL took {took:?}");
    assert_eq!(held(&mut api), (WINDOW as u64, NODE_QUEUE_LIMIT as u64), "the refused one is not held");
    eprintln!(
        "{} requests held for the stopped node b after {holding:?}; the next refused in {took:?}",
        WINDOW + NODE_QUEUE_LIMIT
    );
}
