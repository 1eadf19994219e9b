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
