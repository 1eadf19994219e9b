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
