//! The chaos service (docs/CONFIG.md, the chaos internal service): its
//! shares of failed, dropped and delayed requests reach the callers as
//! SERVICE_ERROR, TIMEOUT and late answers; an exit is a crash the
//! supervisor restarts; beside a healthy instance of the same pattern, a
//! failing one costs its share of requests.

use cumulo_e2e::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub(crate) fn chaos(prefix: &str, settings: &str) -> Service {
    Service::internal(prefix, "chaos").set("settings", format!("{{ {settings} }}"))
}

/// Sends `n` requests at once (send_async) and counts the statuses.
pub(crate) fn burst(api: &mut Api, name: &str, n: usize, timeout_ms: u32) -> HashMap<Status, usize> {
    let tids: Vec<_> = (0..n).map(|i| api.send_async(name, b"", format!("{i}").as_bytes(), opts(timeout_ms))).collect();
    let mut counts = HashMap::new();
    for tid in tids {
        let (_, r) = api.recv_async(Some(tid), Duration::from_secs(30)).unwrap().expect("every request is answered");
        *counts.entry(status(&r)).or_insert(0) += 1;
    }
    counts
}

#[test]
fn failed_dropped_and_delayed_shares_reach_the_callers() {
    let core = Core::start(
        Config::new().service(chaos("/flaky/", "fail = 0.2, drop = 0.1, delay = 0.3, delay_ms = 100, seed = 11")),
    );
    let mut api = core.client();
    core.wait_service("/flaky/x");
    let t0 = Instant::now();
    let n = 1000;
    let counts = burst(&mut api, "/flaky/x", n, 1500);
    let share = |s: Status| *counts.get(&s).unwrap_or(&0) as f64 / n as f64;
    assert!((share(Status::ServiceError) - 0.2).abs() < 0.05, "{counts:?}");
    assert!((share(Status::Timeout) - 0.1).abs() < 0.04, "{counts:?}");
    assert!((share(Status::Ok) - 0.7).abs() < 0.05, "{counts:?}");
    assert_eq!(counts.values().sum::<usize>(), n, "every request answered once: {counts:?}");
    // The delays overlap: 300 requests of 100 ms each do not take 30 s.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let e = api.send_sync("/flaky/y", b"", b"", opts(1000));
    if let Err(e) = e {
        assert!(matches!(e.status(), Some(Status::ServiceError | Status::Timeout)), "{e}");
    }
}

#[test]
fn an_exit_is_a_crash_the_supervisor_restarts() {
    let core = Core::start(Config::new().service(chaos("/dies/", "exit = 1.0").set("restart_delay", 100)));
    let mut api = core.client();
    // Every request stops its instance: the one it held fails CRASHED.
    for round in 0..3 {
        let e = api.send_sync("/dies/x", b"", b"", SendOptions { wait_for_service: true, ..opts(10_000) });
        let status = e.err().and_then(|e| e.status());
        assert_eq!(status, Some(Status::Crashed), "round {round}");
    }
    assert!(core.lines_with(&["stopping this instance on purpose"]).len() >= 3, "{}", core.log());
}

#[test]
fn one_failing_instance_of_a_pattern_costs_its_share() {
    // Four instances of one pattern, one of which fails every request: with
    // round robin, about a quarter fail (what a retry or an ejection would
    // take away).
    let admin = free_port();
    let mut cfg = Config::new().admin("port", admin).unmanaged("dest_refresh", q("round_robin"));
    for settings in ["fail = 1.0", "fail = 0.0", "fail = 0.0", "fail = 0.0"] {
        cfg = cfg.service(chaos("/pool/", settings));
    }
    let core = Core::start(cfg);
    let mut api = core.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while instances(admin) < 4 {
        assert!(Instant::now() < deadline, "not every instance connected");
        std::thread::sleep(ms(50));
    }
    // An internal instance subscribes as it starts: a moment after it connects.
    std::thread::sleep(ms(200));
    let counts = burst(&mut api, "/pool/x", 400, 5000);
    let failed = *counts.get(&Status::ServiceError).unwrap_or(&0);
    assert!((80..=120).contains(&failed), "{counts:?}");
}

/// Connected instances of every service (`GET /v1/services`).
pub(crate) fn instances(admin: u16) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&admin_get(admin, "/v1/services")).unwrap();
    v["services"].as_array().map_or(0, |a| a.iter().filter_map(|s| s["instances"].as_u64()).sum())
}
