//! Restart limits and init failures: a service that cannot start is given
//! up after max_r restarts within max_t, with log lines naming it, and the
//! core keeps serving the others.

use cumulo_e2e::*;

#[test]
fn a_service_exiting_at_start_is_given_up_after_max_r_restarts() {
    let cfg = Config::new()
        .service(ts!("/bad/").mode("exit").set("max_r", 2).set("max_t", 60).set("restart_delay", 50).no_wait())
        .service(ts!("/ok/"));
    let mut core = Core::start(cfg);
    let give_up = core.wait_lines(&["giving up", "service=/bad/", "process=0"], 1, ms(15_000));
    assert!(give_up[0].contains("more than 2 restarts within 60 s"), "{}", give_up[0]);
    std::thread::sleep(ms(400)); // time for a wrong extra restart to show
    assert_eq!(core.lines_with(&["process 0 started", "service=/bad/"]).len(), 3, "first start + 2 restarts");
    let init = core.lines_with(&["init failed: the process exited before connecting", "service=/bad/", "process=0"]);
    assert_eq!(init.len(), 3);
    assert_eq!(core.lines_with(&["process 0 exited with code 1", "service=/bad/"]).len(), 3);
    assert!(core.try_wait().is_none(), "the core must keep running");
    let mut api = core.client();
    assert_eq!(api.send_sync("/ok/x", b"", b"still", opts(5000)).unwrap().body, b"still");
    // Given up: UNAVAILABLE at once, saying so (not NO_SERVICE, as for a
    // name no configured service covers).
    let t = std::time::Instant::now();
    let r = api.send_sync("/bad/x", b"", b"", opts(5000));
    assert_eq!(status(&r), Status::Unavailable);
    assert!(t.elapsed() < ms(1000), "UNAVAILABLE took {:?}", t.elapsed());
    let Err(Error::Status { message, .. }) = r else { unreachable!() };
    assert!(message.contains("/bad/") && message.contains("given up"), "{message}");
    assert_eq!(status(&api.send_sync("/nobody/x", b"", b"", opts(5000))), Status::NoService);
}

#[test]
fn requests_for_a_restarting_service_wait_for_it_within_their_timeout() {
    // A crash, then 300 ms of restart delay and 300 ms of start: requests
    // sent meanwhile wait for the new instance instead of NO_SERVICE.
    let svc = ts!("/r/").env("TS_START_DELAY_MS", 300).set("restart_delay", 300).set("max_r", 10);
    let core = Core::start(Config::new().service(svc));
    let mut api = core.client();
    assert_eq!(api.send_sync("/r/x", b"", b"up", opts(5000)).unwrap().body, b"up");
    assert_eq!(status(&api.send_sync("/r/x", b"", b"crash", opts(5000))), Status::Crashed);
    let t = std::time::Instant::now();
    let mut answered = 0;
    while t.elapsed() < ms(400) {
        let r = api.send_sync("/r/x", b"", b"back", opts(5000));
        assert_eq!(r.map(|r| r.body).map_err(|e| e.to_string()), Ok(b"back".to_vec()), "after {:?}", t.elapsed());
        answered += 1;
    }
    assert!(answered >= 1);
    // A name the service does not serve, once it serves again, fails fast.
    let core2 = Core::start(Config::new().service(ts!("/p/").env("TS_PATTERNS", "only")));
    let mut api2 = core2.client();
    assert!(api2.send_sync("/p/only", b"", b"", opts(5000)).is_ok());
    let t = std::time::Instant::now();
    assert_eq!(status(&api2.send_sync("/p/other", b"", b"", opts(5000))), Status::NoService);
    assert!(t.elapsed() < ms(1000));
}

#[test]
fn a_request_sent_while_its_service_starts_waits_for_it() {
    let svc = ts!("/late/").env("TS_START_DELAY_MS", 800).no_wait();
    let core = Core::start(Config::new().service(svc));
    let mut api = core.client();
    let t = std::time::Instant::now();
    assert_eq!(api.send_sync("/late/x", b"", b"hi", opts(5000)).unwrap().body, b"hi");
    assert!(t.elapsed() >= ms(300), "answered after {:?}: it had to wait for the start", t.elapsed());
    // Within its timeout only: a start slower than the timeout is
    // UNAVAILABLE (try later), not a TIMEOUT (slow), at the timeout.
    let slow = ts!("/slower/").env("TS_START_DELAY_MS", 3000).no_wait();
    let core = Core::start(Config::new().service(slow));
    let mut api = core.client();
    let t = std::time::Instant::now();
    let r = api.send_sync("/slower/x", b"", b"", opts(300));
    assert_eq!(status(&r), Status::Unavailable);
    assert!(t.elapsed() >= ms(250), "answered at its timeout, after {:?}", t.elapsed());
}

#[test]
fn restarts_older_than_max_t_do_not_count() {
    // 1 restart per 1 s window, a restart every ~1.2 s: never given up.
    let svc = ts!("/flaky/").mode("exit").set("max_r", 1).set("max_t", 1).set("restart_delay", 1200).no_wait();
    let core = Core::start(Config::new().service(svc));
    core.wait_lines(&["process 0 started", "service=/flaky/"], 3, ms(15_000));
    assert!(core.lines_with(&["giving up"]).is_empty(), "gave up though restarts were spaced out");
}

#[test]
fn init_timeout_names_the_service_and_process() {
    let svc =
        ts!("/mute/").mode("noconnect").set("count_process", 2).set("timeout_init", 300).set("max_r", 0).no_wait();
    let core = Core::start(Config::new().service(svc));
    for p in ["process=0", "process=1"] {
        let l = core.wait_lines(&["init failed", "service=/mute/", p], 1, ms(10_000));
        assert!(l[0].contains("0 of 1 threads connected within timeout_init (300 ms)"), "{}", l[0]);
        core.wait_lines(&["giving up", "service=/mute/", p], 1, ms(10_000));
    }
}

#[test]
fn a_program_that_cannot_be_run_is_reported() {
    let svc = Service::program("/nope/", "/nonexistent/program").set("max_r", 0).no_wait();
    let core = Core::start(Config::new().service(svc));
    let l = core.wait_lines(&["cannot start /nonexistent/program", "service=/nope/", "process=0"], 1, ms(10_000));
    assert!(l[0].contains("No such file"), "{}", l[0]);
    core.wait_lines(&["giving up", "service=/nope/"], 1, ms(10_000));
}
