//! Faults under load: the load generator (`cumulo bench request`) sends at a
//! fixed rate while a receiving process is killed, hangs, cannot start, or
//! is restarted, removed and added through the admin API. Every request it
//! was due to send must be accounted for (sent = ok + errors + timed out +
//! unanswered) and none may be left unanswered past its timeout.
#![allow(unsafe_code, reason = "signals and rlimits for test processes through libc; a SAFETY comment on every block")]

use cumulo_e2e::*;
use std::time::{Duration, Instant};

fn sigkill(pid: u32) {
    // SAFETY: kill(2) on a child of the core under test.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

#[test]
fn kill_9_under_load_fails_in_flight_requests_at_once() {
    // Two processes, each busy ~60% of the time (20 ms per request at
    // 30/s): a kill usually lands on a request in flight.
    let svc = ts!("/k/")
        .mode("sleep")
        .env("TS_SLEEP_MS", 20)
        .set("count_process", 2)
        .set("restart_delay", 50)
        .set("max_r", 100);
    // At random (not closest): with 2 core threads the processes are
    // served by different threads, and a sender picks both only at random.
    let core = Core::start(Config::new().unmanaged("dest_refresh", q("immediate_random")).service(svc));
    let load = Load::start(&core, "/k/x", 60, ms(8000), ms(5000));
    load.wait_running();
    let mut kills = 0;
    let until = Instant::now() + ms(5500);
    while Instant::now() < until {
        std::thread::sleep(ms(fastrand::u64(300..1100)));
        let pids = core.child_pids();
        if !pids.is_empty() {
            sigkill(pids[fastrand::usize(..pids.len())]);
            kills += 1;
        }
    }
    let r = load.finish();
    r.assert_accounted();
    assert!(kills >= 4, "only {kills} kills");
    // The requests a killed instance held fail with CRASHED at once; if
    // both processes were down at one moment, new ones get NO_SERVICE.
    r.assert_error_kinds(&["CRASHED", "NO_SERVICE"]);
    assert!(r.errors("CRASHED") > 0, "{:?}", r.totals);
    assert_eq!(
        r.totals.timed_out, 0,
        "a dead instance's requests must fail at once, not wait for their timeout: {:?}",
        r.totals
    );
    // Not one log line per kill: a kill may land on a process that had
    // just died and was not yet reaped.
    core.wait_lines(&["killed by signal 9", "service=/k/"], 1, ms(10_000));
    // Both processes serve again (random choice: 20 requests reach both).
    let mut api = core.client();
    let deadline = Instant::now() + ms(15_000);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 2 {
        assert!(Instant::now() < deadline, "processes serving again: {seen:?}");
        match api.send_sync("/k/x", b"", b"after", opts(5000)) {
            Ok(r) => {
                seen.insert(field(&r, "process"));
            }
            Err(e) => panic!("after the kills: {e}"),
        }
    }
}

#[test]
fn a_hung_service_times_out_its_requests_and_the_others_keep_working() {
    // /h/ answers 30 requests, then hangs with its connection open; the
    // keep-alive finds it silent past its requests' timeouts, closes it and
    // kills the process, which is restarted (and hangs again).
    let cfg = Config::new()
        .core("keepalive", 300)
        .service(ts!("/h/").env("TS_HANG_AFTER", 30).set("restart_delay", 50))
        .service(ts!("/ok/"));
    let core = Core::start(cfg);
    let hung = Load::start(&core, "/h/x", 40, ms(6000), ms(1000));
    let fine = Load::start(&core, "/ok/x", 200, ms(6000), ms(5000));
    let (h, f) = (hung.finish(), fine.finish());
    h.assert_accounted();
    f.assert_accounted();
    assert!(h.totals.timed_out > 0, "{:?}", h.totals);
    assert_eq!(f.totals.ok, f.totals.sent, "the healthy service is untouched: {:?}", f.totals);
    core.wait_lines(&["closing it as hung", "/h/"], 1, ms(10_000));
    core.wait_lines(&["killed by signal 9", "service=/h/"], 1, ms(10_000));
    core.wait_lines(&["ts-ready", "service=/h/"], 2, ms(10_000));
}

#[test]
fn a_service_that_cannot_start_costs_the_others_nothing() {
    let cfg = Config::new()
        .service(
            ts!("/bad/")
                .mode("exit")
                .env("TS_EXIT_CODE", 3)
                .set("max_r", 2)
                .set("max_t", 60)
                .set("restart_delay", 400)
                .no_wait(),
        )
        .service(ts!("/ok/"));
    let core = Core::start(cfg);
    let load = Load::start(&core, "/ok/x", 200, ms(5000), ms(5000));
    load.wait_running();
    // While /bad/ starts, exits 3, restarts and is given up: a plain send
    // waits for it and is UNAVAILABLE at its timeout (at once once /bad/ is
    // given up), never NO_SERVICE, since a configured service covers the
    // name; one that waits for a subscriber (WAIT_FOR_SERVICE) times out at
    // its own timeout.
    let mut api = core.client();
    let mut sent = Vec::new();
    for i in 0..24 {
        let o = SendOptions { timeout: 400, wait_for_service: i % 4 == 3, ..Default::default() };
        sent.push(api.send_async("/bad/x", b"", b"", o));
        std::thread::sleep(ms(100));
    }
    let (mut unavailable, mut timeouts) = (0, 0);
    let deadline = Instant::now() + ms(400) + Duration::from_secs(2);
    let mut pending = sent.len();
    while pending > 0 && Instant::now() < deadline {
        if let Some((_, r)) = api.recv_async(None, ms(100)).unwrap() {
            pending -= 1;
            match status(&r) {
                Status::Unavailable => unavailable += 1,
                Status::Timeout => timeouts += 1,
                other => panic!("unexpected answer {other:?}: {r:?}"),
            }
        }
    }
    assert_eq!(pending, 0, "requests left unanswered past their timeout");
    assert_eq!((unavailable, timeouts), (18, 6));
    let r = load.finish();
    r.assert_accounted();
    assert_eq!(r.totals.ok, r.totals.sent, "{:?}", r.totals);
    core.wait_lines(&["process 0 exited with code 3", "service=/bad/"], 3, ms(10_000));
    core.wait_lines(&["giving up", "service=/bad/"], 1, ms(10_000));
    assert_eq!(status(&api.send_sync("/bad/x", b"", b"", opts(5000))), Status::Unavailable);
}

#[test]
fn admin_restart_remove_and_add_under_load() {
    let port = free_port();
    let svc = ts!("/a/").mode("sleep").env("TS_SLEEP_MS", 2).set("count_process", 2);
    let core = Core::start(Config::new().admin("port", port).service(svc));

    // A rolling restart of a two-process service loses nothing.
    let load = Load::start(&core, "/a/x", 150, ms(5000), ms(3000));
    load.wait_running();
    core.admin_cmd(port, &["services", "restart", "1"]);
    core.wait_lines(&["ts-ready", "service=/a/"], 4, ms(15_000));
    let r = load.finish();
    r.assert_accounted();
    assert_eq!(r.totals.ok, r.totals.sent, "rolling restart: {:?}", r.totals);

    // Removed: refused with explicit errors; added again: served again.
    let load = Load::start(&core, "/a/x", 150, ms(7000), ms(3000));
    load.wait_running();
    core.admin_cmd(port, &["services", "remove", "1"]);
    std::thread::sleep(ms(1000));
    let add = format!(
        r#"{{"prefix": "/a/", "path": {}, "count_process": 2, "env": {{"TS_MODE": "sleep", "TS_SLEEP_MS": "2"}}}}"#,
        q(env!("CARGO_BIN_EXE_test_service"))
    );
    core.admin_cmd(port, &["services", "add", "--json", &add]);
    core.wait_lines(&["ts-ready", "service=/a/"], 6, ms(15_000));
    let r = load.finish();
    r.assert_accounted();
    r.assert_error_kinds(&["NO_SERVICE", "SHUTTING_DOWN", "CRASHED"]);
    assert!(r.errors("NO_SERVICE") > 0, "{:?}", r.totals);
    assert!(r.ticks.last().is_some_and(|t| t.ok > 0 && t.errors == 0), "served again once added: {:?}", r.ticks);
    let mut api = core.client();
    assert!(api.send_sync("/a/x", b"", b"", opts(5000)).is_ok());
}
