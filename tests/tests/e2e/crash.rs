//! An instance dying mid-request: the sender learns at once, the process is
//! restarted and serves again.

use cumulo_e2e::*;
use std::time::Instant;

#[test]
fn crashed_mid_request_then_restarted() {
    let core = Core::start(Config::new().service(ts!("/c/").set("restart_delay", 100)));
    let mut api = core.client();
    let before = api.send_sync("/c/x", b"", b"hello", opts(5000)).unwrap();
    let t = Instant::now();
    let r = api.send_sync("/c/x", b"", b"crash", opts(30_000));
    let took = t.elapsed();
    assert_eq!(status(&r), Status::Crashed, "{r:?}");
    assert!(took < ms(5000), "CRASHED must come well before the 30 s timeout, took {took:?}");
    core.wait_lines(&["process 0 killed by signal 9", "service=/c/"], 1, ms(10_000));
    core.wait_lines(&["restarting process 0", "service=/c/"], 1, ms(10_000));
    core.wait_ready(2);
    let after = api.send_sync("/c/x", b"", b"again", opts(5000)).unwrap();
    assert_eq!(after.body, b"again");
    assert_ne!(field(&before, "pid"), field(&after, "pid"), "served by the new process");
    assert_eq!(core.service_pids().len(), 2);
}

#[test]
fn requests_queued_for_a_crashed_instance_go_to_another() {
    // Round robin over two single-instance processes X and Y: sends
    // alternate X, Y, X, Y, X.
    let cfg = Config::new()
        .unmanaged("dest_refresh", q("round_robin"))
        .service(ts!("/c/").set("count_process", 2).set("restart_delay", 3000));
    let core = Core::start(cfg);
    let mut api = core.client();
    let bodies: [&[u8]; 5] = [b"sleep:500", b"sleep:1000", b"crash", b"y2", b"x3"];
    let t: Vec<_> = bodies.iter().map(|b| api.send_async("/c/x", b"", b, opts(10_000))).collect();
    let mut get = |i: usize| api.recv_async(Some(t[i]), ms(10_000)).unwrap().expect("an answer").1;
    let x = field(&get(0).unwrap(), "instance");
    let y = field(&get(1).unwrap(), "instance");
    assert_ne!(x, y);
    assert_eq!(status(&get(2)), Status::Crashed);
    assert_eq!(field(&get(3).unwrap(), "instance"), y);
    // Was queued behind the crash at X: re-routed to Y instead of lost.
    assert_eq!(field(&get(4).unwrap(), "instance"), y);
}
