//! Resiliency for operators (docs/ADMIN.md, Resiliency): the policies and
//! breakers through the admin API, /metrics and `cumulo resiliency`;
//! breakers reset by hand; policies replaced through the API (a wrong one
//! changes nothing) and by a reload, in force for the next request on every
//! shard.

use cumulo_e2e::*;
use serde_json::Value;
use std::time::{Duration, Instant};

const BREAKER: &str = "[[policy]]\nname = \"b\"\ndestinations = [\"/b/*\"]\n\
                       [policy.circuit_breaker]\nconsecutive_failures = 3\nopen_ms = 60000\n";

fn config(admin: u16, policy: &str) -> Config {
    Config::new()
        .admin("port", admin)
        .service(Service::internal("/b/", "chaos").set("settings", "{ fail = 1.0 }"))
        .table(policy)
}

/// Starts a core with the failing chaos service under `policy`, its
/// instance connected.
fn start(admin: u16, policy: &str) -> Core {
    let core = Core::start(config(admin, policy));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !admin_get(admin, "/v1/services").contains("\"instances\": 1") {
        assert!(Instant::now() < deadline, "the chaos instance did not connect");
        std::thread::sleep(ms(50));
    }
    // An internal instance subscribes a moment after it connects.
    std::thread::sleep(ms(200));
    core
}

fn call(api: &mut Api) -> Status {
    status(&api.send_sync("/b/x", b"", b"", opts(2000)))
}

/// Trips the breaker: 3 failures, then refused.
fn trip(api: &mut Api) {
    for _ in 0..3 {
        assert_eq!(call(api), Status::ServiceError);
    }
    assert_eq!(call(api), Status::Unavailable, "the breaker is open");
}

/// An admin call with a body: (HTTP status, body).
fn admin_call(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

fn resiliency(admin: u16) -> Value {
    serde_json::from_str(&admin_get(admin, "/v1/resiliency")).unwrap()
}

/// The states of policy `b`'s breakers, one per shard that has one.
fn states(admin: u16) -> Vec<String> {
    let v = resiliency(admin);
    let breakers = v["breakers"].as_array().cloned().unwrap_or_default();
    breakers.iter().filter(|b| b["policy"] == "b").map(|b| b["state"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_api_shows_a_tripped_breaker_and_resets_it() {
    let admin = free_port();
    let core = start(admin, BREAKER);
    let mut api = core.client();
    let v = resiliency(admin);
    assert_eq!(v["policies"][0]["name"], "b", "{v}");
    assert_eq!(v["policies"][0]["circuit_breaker"]["consecutive_failures"], 3, "{v}");
    assert_eq!(v["missing_shards"], serde_json::json!([]), "{v}");

    trip(&mut api);
    assert!(states(admin).contains(&"open".to_string()), "{}", resiliency(admin));
    let v = resiliency(admin);
    assert_eq!(v["stats"]["trips"], 1, "{v}");
    assert_eq!(v["stats"]["refused"], 1, "{v}");
    let open = v["breakers"].as_array().unwrap().iter().find(|b| b["state"] == "open").cloned().unwrap();
    assert_eq!(open["failures"], 3, "{open}");
    assert!(open["opens_in_ms"].as_u64().unwrap() > 50_000, "{open}");

    let metrics = admin_get(admin, "/metrics");
    for line in [
        "# TYPE cumulo_breaker_state gauge",
        "cumulo_breaker_state{policy=\"b\",pattern=\"/b/*\"} 1",
        "cumulo_breaker_trips_total 1",
        "cumulo_breaker_refused_total 1",
        "cumulo_retries_total 0",
        "cumulo_ejected_instances 0",
    ] {
        assert!(metrics.lines().any(|l| l == line), "no line {line:?} in:\n{metrics}");
    }

    let (code, body) = admin_call(admin, "POST", "/v1/resiliency/breakers/reset?policy=b", "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["reset"], 1, "{body}");
    assert!(states(admin).iter().all(|s| s == "closed"), "{}", resiliency(admin));
    assert_eq!(call(&mut api), Status::ServiceError, "the next request reaches the service again");
    assert!(!core.lines_with(&["breakers reset through the admin API", "1 were open"]).is_empty(), "{}", core.log());
}

#[test]
fn a_wrong_policy_changes_nothing_and_a_good_one_applies_to_the_next_request() {
    let admin = free_port();
    let core = start(admin, BREAKER);
    let mut api = core.client();
    let wrong = r#"[{"name": "b", "destinations": ["/b/*"], "retry": {"max_retries": 2, "jitter": 2.0}}]"#;
    let (code, body) = admin_call(admin, "PUT", "/v1/resiliency/policies", wrong);
    assert_eq!(code, 400, "{body}");
    let e: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(e["field"], "policies[0].retry.jitter", "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("policies[0].retry.jitter: "), "{e}");
    assert_eq!(resiliency(admin)["policies"][0]["circuit_breaker"]["consecutive_failures"], 3);

    // One failure trips it now.
    let one =
        r#"{"policies": [{"name": "b", "destinations": ["/b/*"], "circuit_breaker": {"consecutive_failures": 1}}]}"#;
    let (code, body) = admin_call(admin, "PUT", "/v1/resiliency/policies", one);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["policies"][0]["circuit_breaker"]["consecutive_failures"],
        1
    );
    assert_eq!(call(&mut api), Status::ServiceError);
    assert_eq!(call(&mut api), Status::Unavailable, "open after one failure");
    assert!(!core.lines_with(&["policies replaced through the admin API: 1 policies"]).is_empty(), "{}", core.log());

    // No policy: no breaker, and no resiliency series in /metrics.
    let (code, body) = admin_call(admin, "PUT", "/v1/resiliency/policies", "[]");
    assert_eq!(code, 200, "{body}");
    for _ in 0..4 {
        assert_eq!(call(&mut api), Status::ServiceError);
    }
    assert!(!admin_get(admin, "/metrics").contains("cumulo_breaker"), "no noise without policies");
}

#[test]
fn cumulo_resiliency_shows_resets_and_sets() {
    let admin = free_port();
    let core = start(admin, BREAKER);
    let mut api = core.client();
    trip(&mut api);
    let out = core.admin_cmd(admin, &["resiliency"]);
    let row = out.lines().find(|l| l.contains("/b/*") && l.contains("open"));
    assert!(row.is_some_and(|r| r.starts_with("b ")), "{out}");
    assert!(out.contains("trips 1"), "{out}");

    let out = core.admin_cmd(admin, &["resiliency", "reset", "--pattern", "/b/*"]);
    assert!(out.starts_with("1 breakers were open"), "{out}");
    assert_eq!(call(&mut api), Status::ServiceError);

    let file = core.dir.0.join("policies.toml");
    std::fs::write(
        &file,
        "[[policy]]\nname = \"b\"\ndestinations = [\"/b/*\"]\n[policy.circuit_breaker]\nconsecutive_failures = 1\n",
    )
    .unwrap();
    let out = core.admin_cmd(admin, &["resiliency", "set", file.to_str().unwrap()]);
    assert!(out.starts_with("1 policies in force"), "{out}");
    assert_eq!(call(&mut api), Status::ServiceError);
    assert_eq!(call(&mut api), Status::Unavailable);
}

#[test]
fn a_reload_applies_a_changed_policy_on_every_shard() {
    let admin = free_port();
    let core = start(admin, BREAKER);
    let mut api = core.client();
    let one = BREAKER.replace("consecutive_failures = 3", "consecutive_failures = 1");
    std::fs::write(&core.config_path, config(admin, &one).render(&core.socket_str())).unwrap();
    let out = core.admin_cmd(admin, &["reload"]);
    assert!(out.contains("replace the policies on every shard: 1 (b)"), "{out}");
    assert!(!core.lines_with(&["reload of", "policies replaced (1: b)"]).is_empty(), "{}", core.log());
    assert_eq!(call(&mut api), Status::ServiceError);
    assert_eq!(call(&mut api), Status::Unavailable, "open after one failure");
    // Clients spread over the shards (core.threads): on each, one failure
    // opens its breaker.
    let mut clients: Vec<Api> = (0..6).map(|_| core.client()).collect();
    let failed = clients.iter_mut().map(call).filter(|s| *s == Status::ServiceError).count();
    let breakers = resiliency(admin)["breakers"].as_array().cloned().unwrap();
    assert!(breakers.iter().all(|b| b["state"] == "open"), "{breakers:?}");
    assert_eq!(failed + 1, breakers.len(), "one failure per shard: {breakers:?}");
    // Reloaded again unchanged: the policies in force stay, the open
    // breaker too.
    let out = core.admin_cmd(admin, &["reload"]);
    assert!(out.contains("nothing to change"), "{out}");
    assert_eq!(call(&mut api), Status::Unavailable);
}

#[test]
fn policies_put_through_the_api_rule_the_requests_of_every_shard() {
    // The gateway runs on every shard (core.threads) and the kernel spreads
    // its connections: requests enter on each shard.
    let (admin, web) = (free_port(), free_port());
    let gateway = Service::internal("/web/", "http").set("settings", format!("{{ port = {web} }}"));
    let _core = Core::start(config(admin, BREAKER).service(gateway));
    let one = r#"[{"name": "b", "destinations": ["/b/*"], "circuit_breaker": {"consecutive_failures": 1}}]"#;
    let (code, body) = admin_call(admin, "PUT", "/v1/resiliency/policies", one);
    assert_eq!(code, 200, "{body}");
    for _ in 0..20 {
        let deadline = Instant::now() + Duration::from_secs(10);
        while admin_call(web, "GET", "/b/x", "").0 == 0 {
            assert!(Instant::now() < deadline, "the gateway does not answer");
            std::thread::sleep(ms(20));
        }
    }
    let breakers = resiliency(admin)["breakers"].as_array().cloned().unwrap();
    let mut shards: Vec<u64> = breakers.iter().map(|b| b["shard"].as_u64().unwrap()).collect();
    shards.sort_unstable();
    shards.dedup();
    assert_eq!(
        shards.len() as u32,
        cumulo_e2e::config::test_threads(),
        "requests entered on every shard: {breakers:?}"
    );
    for b in &breakers {
        assert_eq!((b["state"].as_str(), b["failures"].as_u64()), (Some("open"), Some(1)), "{breakers:?}");
    }
}
