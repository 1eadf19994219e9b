//! queue_limit: a request for an instance whose queue is full fails at once
//! with QUEUE_FULL; those already queued are still served.

use cumulo_e2e::*;
use std::time::Instant;

#[test]
fn a_full_queue_refuses_at_once() {
    let core = Core::start(Config::new().service(ts!("/q/").set("queue_limit", 2).set("timeout_terminate", 300)));
    let mut api = core.client();
    let busy = api.send_async("/q/x", b"", b"sleep:1500", opts(10_000));
    let queued: Vec<_> =
        (0..2).map(|i| api.send_async("/q/x", b"", format!("q{i}").as_bytes(), opts(10_000))).collect();
    let t = Instant::now();
    let r = api.send_sync("/q/x", b"", b"one too many", opts(10_000));
    assert_eq!(status(&r), Status::QueueFull);
    assert!(t.elapsed() < ms(1000), "QUEUE_FULL must be immediate, took {:?}", t.elapsed());
    for (i, tid) in std::iter::once(busy).chain(queued).enumerate() {
        let r = api.recv_async(Some(tid), ms(10_000)).unwrap().expect("answer").1;
        assert!(r.is_ok(), "request {i}: {r:?}");
    }
}

/// Requests that timed out while queued are finished: they must not hold
/// places in the queue.
#[test]
fn timed_out_requests_free_their_place_in_the_queue() {
    let core = Core::start(Config::new().service(ts!("/q/").set("queue_limit", 2).set("timeout_terminate", 300)));
    let mut api = core.client();
    let busy = api.send_async("/q/x", b"", b"sleep:2500", opts(10_000));
    for _ in 0..2 {
        assert_eq!(status(&api.send_sync("/q/x", b"", b"", opts(200))), Status::Timeout);
    }
    // The queue holds nothing alive: this one must be queued and served.
    let r = api.send_sync("/q/x", b"", b"after", opts(10_000));
    assert!(r.is_ok(), "{r:?}");
    assert!(api.recv_async(Some(busy), ms(10_000)).unwrap().unwrap().1.is_ok());
}
