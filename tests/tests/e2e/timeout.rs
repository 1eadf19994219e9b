//! Timeouts: the sender gets TIMEOUT at its deadline; the late answer is
//! dropped by the core and the instance goes on serving.

use cumulo_e2e::*;
use std::time::Instant;

#[test]
fn timeout_within_tolerance() {
    let core = Core::start(Config::new().service(ts!("/t/").mode("hang").set("timeout_terminate", 200)));
    let mut api = core.client();
    for timeout in [300u32, 800] {
        let t = Instant::now();
        let r = api.send_sync("/t/x", b"", b"", opts(timeout));
        let took = t.elapsed();
        assert_eq!(status(&r), Status::Timeout);
        let want = ms(timeout as u64);
        assert!(took >= want - ms(20) && took < want + ms(1000), "timeout {timeout} ms: TIMEOUT after {took:?}");
    }
}

#[test]
fn the_default_timeout_is_the_services_timeout_sync() {
    let cfg =
        Config::new().unmanaged("timeout_sync", 400).service(ts!("/t/").mode("hang").set("timeout_terminate", 200));
    let core = Core::start(cfg);
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/t/x", b"", b"", opts(0));
    assert_eq!(status(&r), Status::Timeout);
    assert!(t.elapsed() >= ms(380) && t.elapsed() < ms(1500), "took {:?}", t.elapsed());
}

#[test]
fn a_late_answer_is_dropped_and_the_next_request_served() {
    let core = Core::start(Config::new().service(ts!("/t/")));
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/t/x", b"", b"sleep:1200", opts(400));
    assert_eq!(status(&r), Status::Timeout);
    assert!(t.elapsed() < ms(1100), "TIMEOUT came after {:?}", t.elapsed());
    // Queued behind the late one; served once it is done.
    let r = api.send_sync("/t/x", b"", b"next", opts(5000)).unwrap();
    assert_eq!(r.body, b"next");
    assert_eq!(field(&r, "seq"), "2");
    // The late RETURN never reaches the sender as a second response.
    assert!(api.recv_async(None, ms(300)).unwrap().is_none(), "a late answer reached the sender");
    // The core counted it as late (its statistics are logged at exit).
    let mut core = core;
    core.signal(libc::SIGTERM);
    assert!(core.wait_exit(ms(10_000)).is_some());
    let stats = core.wait_lines(&["stopped;"], 1, ms(1000));
    assert!(stats[0].contains("timeouts 1,") && stats[0].contains("late 1,"), "{}", stats[0]);
}

/// The core's timer table keeps an entry per request past its answer and
/// sweeps them out when they outnumber the requests in flight plus a slack
/// (crates/router/src/timeouts.rs). Across several sweeps, with a shorter timeout
/// armed after a longer one: each times out at its own deadline, and none
/// of the answered requests is lost or expired.
#[test]
fn timeouts_stay_on_time_across_thousands_of_answered_requests() {
    let cfg = Config::new()
        .service(ts!("/t/"))
        .service(ts!("/h/").mode("hang").set("timeout_terminate", 200).set("count_thread", 2));
    let core = Core::start(cfg);
    let mut api = core.client();
    let t = Instant::now();
    let long = api.send_async("/h/long", b"", b"", opts(4000));
    let short = api.send_async("/h/short", b"", b"", opts(1500));
    let mut answered = 0;
    for _ in 0..250 {
        let batch: Vec<_> = (0..100).map(|_| api.send_async("/t/x", b"", b"", opts(60_000))).collect();
        for tid in batch {
            let (_, r) = api.recv_async(Some(tid), ms(10_000)).unwrap().expect("an answer");
            assert_eq!(status(&r), Status::Ok);
            answered += 1;
        }
    }
    assert_eq!(answered, 25_000);
    let (_, r) = api.recv_async(Some(short), ms(6000)).unwrap().expect("TIMEOUT for the short one");
    assert_eq!(status(&r), Status::Timeout);
    let took = t.elapsed();
    assert!(took >= ms(1480) && took < ms(2500), "the 1500 ms request timed out after {took:?}");
    let (_, r) = api.recv_async(Some(long), ms(6000)).unwrap().expect("TIMEOUT for the long one");
    assert_eq!(status(&r), Status::Timeout);
    let took = t.elapsed();
    assert!(took >= ms(3980) && took < ms(5000), "the 4000 ms request timed out after {took:?}");
}
