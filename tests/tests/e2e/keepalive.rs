//! Keep-alive: an instance stuck in a handler past its requests' timeouts
//! is closed as hung and its process restarted; idle instances that answer
//! PINGs are left alone.

use cumulo_e2e::*;

#[test]
fn a_hung_instance_is_killed_and_restarted_idle_ones_stay() {
    let cfg = Config::new()
        .core("keepalive", 300)
        .service(ts!("/hang/").mode("hang").set("restart_delay", 50))
        .service(ts!("/idle/"));
    let core = Core::start(cfg);
    let mut api = core.client();
    assert_eq!(status(&api.send_sync("/hang/x", b"", b"", opts(300))), Status::Timeout);
    core.wait_lines(&["closing it as hung", "/hang/ process 0 thread 0"], 1, ms(10_000));
    core.wait_lines(&["process 0 killed by signal 9", "service=/hang/"], 1, ms(10_000));
    core.wait_lines(&["ts-ready", "service=/hang/"], 2, ms(10_000));
    // Several keep-alive periods have passed: the idle instance answered
    // its PINGs and was neither closed nor restarted.
    assert!(core.lines_with(&["closing it as hung", "/idle/"]).is_empty());
    assert_eq!(core.lines_with(&["ts-ready", "service=/idle/"]).len(), 1);
    // A new client: the first one did not read while the test waited, so it
    // answered no PINGs and may rightly have been closed as hung too.
    assert!(core.client().send_sync("/idle/x", b"", b"", opts(5000)).is_ok());
}

#[test]
fn a_request_inside_its_timeout_protects_a_slow_instance() {
    // Busy for 1.5 s (5 keep-alive periods) on a request with 5 s left.
    let core = Core::start(Config::new().core("keepalive", 300).service(ts!("/slow/")));
    let mut api = core.client();
    let r = api.send_sync("/slow/x", b"", b"sleep:1500", opts(5000));
    assert!(r.is_ok(), "{r:?}");
    assert!(core.lines_with(&["closing it as hung"]).is_empty());
}

/// The core's event loop stalls (here: the whole process is stopped) for
/// longer than the keep-alive window. Its instances did nothing wrong: the
/// core could not read them. None may be closed as hung, killed or
/// restarted, however often it happens.
#[test]
fn a_stalled_core_keeps_its_healthy_services() {
    let cfg = Config::new()
        .core("keepalive", 200)
        .service(ts!("/a/").set("count_process", 2))
        .service(ts!("/b/").set("count_thread", 2));
    let core = Core::start(cfg);
    let before = core.child_pids();
    assert_eq!(before.len(), 3, "{before:?}");
    for _ in 0..3 {
        // 8 keep-alive windows without a single turn of the event loop.
        core.signal(libc::SIGSTOP);
        std::thread::sleep(ms(1600));
        core.signal(libc::SIGCONT);
        std::thread::sleep(ms(700));
    }
    // A few ordinary keep-alive rounds after the last stall.
    std::thread::sleep(ms(1000));
    assert!(core.lines_with(&["closing it as hung"]).is_empty(), "healthy instances were closed as hung");
    assert_eq!(core.child_pids(), before, "service processes were restarted");
    assert_eq!(core.service_pids().len(), 3, "no process was started again");
    let mut api = core.client();
    for name in ["/a/x", "/b/x"] {
        for _ in 0..4 {
            let r = api.send_sync(name, b"", b"after", opts(5000));
            assert!(r.is_ok(), "{name}: {r:?}");
        }
    }
}
