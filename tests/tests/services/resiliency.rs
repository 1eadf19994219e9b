//! Resiliency policies (`[[policy]]`, docs/CONFIG.md "Resiliency") against
//! the chaos service: retries within the deadline, circuit breakers,
//! outlier ejection, a policy's timeout.

use cumulo_e2e::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

fn chaos(prefix: &str, settings: &str) -> Service {
    Service::internal(prefix, "chaos").set("settings", format!("{{ {settings} }}"))
}

/// Sends `n` requests at once (send_async) and counts the statuses.
fn burst(api: &mut Api, name: &str, n: usize, timeout_ms: u32) -> HashMap<Status, usize> {
    let tids: Vec<_> = (0..n).map(|i| api.send_async(name, b"", format!("{i}").as_bytes(), opts(timeout_ms))).collect();
    let mut counts = HashMap::new();
    for tid in tids {
        let (_, r) = api.recv_async(Some(tid), Duration::from_secs(30)).unwrap().expect("every request is answered");
        *counts.entry(status(&r)).or_insert(0) += 1;
    }
    counts
}

/// Connected instances of every service (`GET /v1/services`).
fn instances(admin: u16) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&admin_get(admin, "/v1/services")).unwrap();
    v["services"].as_array().map_or(0, |a| a.iter().filter_map(|s| s["instances"].as_u64()).sum())
}

fn wait_instances(admin: u16, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while instances(admin) < n {
        assert!(Instant::now() < deadline, "not every instance connected");
        std::thread::sleep(ms(50));
    }
    // An internal instance subscribes as it starts: a moment after it connects.
    std::thread::sleep(ms(200));
}

#[test]
fn outlier_ejection_takes_the_failing_instance_of_four_out() {
    let admin = free_port();
    let mut cfg = Config::new().admin("port", admin).unmanaged("dest_refresh", q("round_robin")).table(
        "[[policy]]\nname = \"pool\"\ndestinations = [\"/pool/*\"]\n\
         [policy.outlier]\nconsecutive_failures = 3\nejection_ms = 2000\n",
    );
    for settings in ["fail = 1.0", "fail = 0.0", "fail = 0.0", "fail = 0.0"] {
        cfg = cfg.service(chaos("/pool/", settings));
    }
    let core = Core::start(cfg);
    let mut api = core.client();
    wait_instances(admin, 4);
    let mut ok = 0;
    let mut total = 0;
    // 4000 requests, 20 at a time: what is in flight when the instance is
    // ejected still fails.
    for _ in 0..200 {
        let counts = burst(&mut api, "/pool/x", 20, 5000);
        ok += counts.get(&Status::Ok).copied().unwrap_or(0);
        total += counts.values().sum::<usize>();
    }
    // Without the policy about a quarter fail (chaos.rs); with it the
    // failing instance gets 3 requests per ejection.
    assert!(ok as f64 >= 0.99 * total as f64, "{ok} of {total} OK");
    assert!(!core.lines_with(&["taken out of '/pool/*'", "policy 'pool'"]).is_empty(), "{}", core.log());
}

#[test]
fn service_errors_are_retried_on_another_instance_when_the_policy_says_so() {
    let admin = free_port();
    let cfg = Config::new()
        .admin("port", admin)
        .service(chaos("/r/", "fail = 1.0"))
        .service(chaos("/r/", "fail = 0.0"))
        .table(
            "[[policy]]\nname = \"r\"\ndestinations = [\"/r/*\"]\n\
             [policy.retry]\nmax_retries = 2\ninterval_ms = 5\non = [\"SERVICE_ERROR\"]\n",
        );
    let core = Core::start(cfg);
    let mut api = core.client();
    wait_instances(admin, 2);
    let counts = burst(&mut api, "/r/x", 400, 5000);
    assert_eq!(counts.get(&Status::Ok).copied(), Some(400), "{counts:?}");
}

#[test]
fn a_breaker_opens_answers_at_once_half_opens_and_reopens() {
    let admin = free_port();
    let cfg = Config::new().admin("port", admin).service(chaos("/b/", "fail = 1.0")).table(
        "[[policy]]\nname = \"b\"\ndestinations = [\"/b/*\"]\n\
         [policy.circuit_breaker]\nconsecutive_failures = 3\nopen_ms = 400\n",
    );
    let core = Core::start(cfg);
    let mut api = core.client();
    wait_instances(admin, 1);
    let call = |api: &mut Api| status(&api.send_sync("/b/x", b"", b"", opts(2000)));
    for _ in 0..3 {
        assert_eq!(call(&mut api), Status::ServiceError);
    }
    let t0 = Instant::now();
    let e = api.send_sync("/b/x", b"", b"", opts(2000)).unwrap_err();
    assert_eq!(e.status(), Some(Status::Unavailable), "{e}");
    assert!(e.to_string().contains("circuit breaker of policy 'b'"), "{e}");
    assert!(t0.elapsed() < ms(100), "answered at once: {:?}", t0.elapsed());
    std::thread::sleep(ms(450));
    assert_eq!(call(&mut api), Status::ServiceError, "the probe goes through and fails");
    assert_eq!(call(&mut api), Status::Unavailable, "open again");
    assert!(!core.lines_with(&["circuit breaker of policy 'b' for '/b/*' opened"]).is_empty(), "{}", core.log());
}

#[test]
fn no_service_is_retried_within_the_deadline_never_after() {
    let cfg = Config::new().table(
        "[[policy]]\nname = \"late\"\ndestinations = [\"/late/*\"]\n\
         [policy.retry]\nmax_retries = 10\nbackoff = \"constant\"\ninterval_ms = 100\njitter = 0.0\n",
    );
    let core = Core::start(cfg);
    let mut api = core.client();
    let t0 = Instant::now();
    let e = api.send_sync("/late/x", b"", b"", opts(350)).unwrap_err();
    let took = t0.elapsed();
    assert_eq!(e.status(), Some(Status::NoService), "{e}");
    // Attempts at 0, 100, 200, 300 ms; the next (400) would pass the deadline.
    assert!(took >= ms(290) && took < ms(350), "{took:?}");
}

/// An unmanaged instance of `/h/` that answers `work` with `tag` and its
/// health probes OK once `healthy` exists, with an error before.
fn probed_instance(socket: String, tag: &'static str, healthy: std::path::PathBuf, stop: std::path::PathBuf) {
    std::thread::spawn(move || {
        let mut api = Api::connect(Options::unmanaged(socket, "/h/")).unwrap();
        api.subscribe("work", move |_, _| Ok(cumulo::Answer::body(tag))).unwrap();
        api.subscribe("health", move |_, _| {
            if healthy.exists() {
                Ok(cumulo::Answer::body("ok"))
            } else {
                Err("not ready".into())
            }
        })
        .unwrap();
        while !stop.exists() {
            api.poll(Some(ms(20))).unwrap();
        }
    });
}

fn answers_by_tag(api: &mut Api, n: usize) -> HashMap<String, usize> {
    let mut by = HashMap::new();
    for _ in 0..n {
        let r = api.send_sync("/h/work", b"", b"", opts(2000)).unwrap();
        *by.entry(String::from_utf8_lossy(&r.body).to_string()).or_insert(0) += 1;
    }
    by
}

#[test]
fn an_instance_failing_its_health_probes_leaves_selection_until_one_succeeds() {
    let dir = TempDir::new();
    let (good, sick, stop) = (dir.0.join("good"), dir.0.join("sick"), dir.0.join("stop"));
    std::fs::write(&good, "").unwrap();
    let core = Core::start(
        Config::new()
            .unmanaged("health", "{ pattern = \"health\", interval_ms = 150, timeout_ms = 100, threshold = 2 }"),
    );
    probed_instance(core.socket_str(), "good", good.clone(), stop.clone());
    probed_instance(core.socket_str(), "sick", sick.clone(), stop.clone());
    let mut api = core.client();
    core.wait_lines(&["failed 2 health probes in a row", "out of selection"], 1, Duration::from_secs(10));
    let by = answers_by_tag(&mut api, 100);
    assert_eq!(by.get("good"), Some(&100), "{by:?}");
    std::fs::write(&sick, "").unwrap();
    core.wait_lines(&["answered its health probe: back in selection"], 1, Duration::from_secs(10));
    let by = answers_by_tag(&mut api, 200);
    assert!(by.get("sick").copied().unwrap_or(0) > 20, "both serve again: {by:?}");
    std::fs::write(&stop, "").unwrap();
}
