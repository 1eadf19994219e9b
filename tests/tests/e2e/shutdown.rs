//! Graceful shutdown on SIGTERM: queued requests fail with SHUTTING_DOWN,
//! services are stopped, the core exits 0 within the terminate timeout.

use cumulo_e2e::*;
use std::path::Path;
use std::time::Instant;

#[test]
fn sigterm_stops_everything_and_fails_queued_requests() {
    let cfg = Config::new()
        .service(ts!("/idle/").set("count_process", 2))
        .service(ts!("/busy/").mode("hang").set("timeout_terminate", 1000));
    let mut core = Core::start(cfg);
    let pids = core.service_pids();
    assert_eq!(pids.len(), 3);
    let mut api = core.client();
    api.send_async("/busy/x", b"", b"", opts(30_000)); // delivered: the service hangs in it
    let queued: Vec<_> = (0..3).map(|_| api.send_async("/busy/x", b"", b"", opts(30_000))).collect();
    api.flush().unwrap();
    std::thread::sleep(ms(300)); // the core has them: one delivered, three queued

    let t = Instant::now();
    core.signal(libc::SIGTERM);
    for tid in &queued {
        let r = api.recv_async(Some(*tid), ms(5000)).unwrap().expect("a response").1;
        assert_eq!(status(&r), Status::ShuttingDown);
    }
    let st = core.wait_exit(ms(10_000)).expect("the core exits");
    let took = t.elapsed();
    assert_eq!(st.code(), Some(0), "exit status {st}");
    // The hung service gets timeout_terminate, then SIGTERM.
    assert!(took < ms(1000 + 2000), "exited after {took:?}");
    for pid in pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "service process {pid} outlived the core");
    }
    assert_eq!(core.lines_with(&["exited with code 0", "service=/idle/"]).len(), 2, "idle services left on TERMINATE");
    core.wait_lines(&["still running 1000 ms after TERMINATE", "service=/busy/"], 1, ms(100));
    assert!(!core.socket.exists(), "the socket file is removed");
}

#[test]
fn sigint_without_services_exits_0_at_once() {
    let mut core = Core::start(Config::new());
    let t = Instant::now();
    core.signal(libc::SIGINT);
    let st = core.wait_exit(ms(5000)).expect("the core exits");
    assert_eq!(st.code(), Some(0));
    assert!(t.elapsed() < ms(1000), "took {:?}", t.elapsed());
    core.wait_lines(&["SIGINT: shutting down"], 1, ms(100));
}

#[test]
fn sends_after_the_shutdown_began_fail_with_shutting_down() {
    let mut core = Core::start(Config::new().service(ts!("/busy/").mode("hang").set("timeout_terminate", 1500)));
    let mut api = core.client();
    // A hung request keeps the service, and so the core, up for a while.
    api.send_async("/busy/x", b"", b"", opts(30_000));
    api.flush().unwrap();
    std::thread::sleep(ms(200));
    core.signal(libc::SIGTERM);
    core.wait_lines(&["SIGTERM: shutting down"], 1, ms(5000));
    let r = api.send_sync("/busy/x", b"", b"", opts(5000));
    assert_eq!(status(&r), Status::ShuttingDown);
    assert!(core.wait_exit(ms(10_000)).is_some());
}
