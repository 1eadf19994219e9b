//! Services added, scaled, restarted and removed through the admin API of a
//! running core, with real http_req processes and a real sender.

use crate::common::*;
use cumulo::{SendOptions, Status};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAME: &str = "/tests/http_req/rust.xml/get";

fn status_of(e: &cumulo::Error) -> Option<Status> {
    match e {
        cumulo::Error::Status { status, .. } => Some(*status),
        _ => None,
    }
}

#[test]
fn a_service_added_at_run_time_answers_then_removed_gives_no_service() {
    let core = TestCore::start("");
    assert_eq!(core.get("/v1/services")["services"], json!([]));

    let body = json!({ "prefix": "/tests/http_req/", "path": http_req().display().to_string(), "count_process": 2 });
    let r = core.http("POST", "/v1/services", Some(&body.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["ids"], json!([1]));
    let svc = core.wait_running(1, 2);
    core.wait_subscribed(NAME, 2);
    assert_eq!((svc["kind"].as_str(), svc["count_process"].as_u64()), (Some("external"), Some(2)));

    let mut client = core.client("/test/client/");
    for n in [42, -7] {
        let resp = client.send_sync(NAME, b"", &value_request(n), SendOptions::default()).expect("http_req answers");
        assert_eq!(String::from_utf8_lossy(&resp.body), format!("<http_test><value>{n}</value></http_test>"));
    }
    let subs = core.get("/v1/subscriptions")["subscriptions"].clone();
    let entry = subs.as_array().unwrap().iter().find(|s| s["pattern"] == NAME).expect("pattern listed");
    let mut processes: Vec<u64> =
        entry["instances"].as_array().unwrap().iter().map(|i| i["process_index"].as_u64().unwrap()).collect();
    processes.sort();
    assert_eq!(processes, [0, 1]);
    assert!(entry["instances"].as_array().unwrap().iter().all(|i| i["service_id"] == 1));
    assert_eq!(core.wait_service(1, "showing 2 handled", |v| v["requests_handled"] == 2)["requests"]["received"], 2);

    let r = core.http("DELETE", "/v1/services/1", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["processes_stopped"], 2);
    assert_eq!(core.get("/v1/services")["services"], json!([]));
    let e = client.send_sync(NAME, b"", &value_request(1), SendOptions::default()).unwrap_err();
    assert_eq!(status_of(&e), Some(Status::NoService), "{e}");
    let r = core.http("GET", "/v1/services/1", None);
    assert_eq!((r.status, r.json()["code"].as_str()), (404, Some("not_found")));
    assert_eq!(core.http("DELETE", "/v1/services/1", None).status, 404);

    // one line per lifecycle event, naming the service and process
    let events = core.log_events();
    let has = |msg: &str, process: Option<u64>| {
        events.iter().any(|e| {
            e["fields"]["message"].as_str().is_some_and(|m| m.contains(msg))
                && e["fields"]["service_id"] == 1
                && e["fields"]["service"] == "/tests/http_req/"
                && process.is_none_or(|p| e["fields"]["process"] == p)
        })
    };
    assert!(has("service added", None), "{}", core.log_text());
    assert!(has("process 1 started (pid", Some(1)));
    assert!(has("process 1 exited with code 0", Some(1)));
    assert!(has("service removed", None));
}

/// Sends without pause (20 requests outstanding) until told to stop, and
/// counts how each request ended. Every request must end: in an answer or an
/// explicit error.
fn sender(socket: String, stop: Arc<AtomicBool>) -> (u64, u64, BTreeMap<String, u64>) {
    let mut api = cumulo::Api::connect(cumulo::Options::unmanaged(socket, "/test/sender/")).unwrap();
    let (mut sent, mut ok) = (0u64, 0u64);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut outstanding = HashSet::new();
    let end = Instant::now() + Duration::from_secs(60);
    let opts = SendOptions { timeout: 10_000, ..Default::default() };
    while !stop.load(Ordering::Relaxed) && Instant::now() < end || !outstanding.is_empty() {
        while outstanding.len() < 20 && !stop.load(Ordering::Relaxed) && Instant::now() < end {
            outstanding.insert(api.send_async(NAME, b"", &value_request(sent as i64), opts));
            sent += 1;
        }
        let (tid, result) = api.recv_async(None, Duration::from_secs(15)).unwrap().expect("every request is answered");
        assert!(outstanding.remove(&tid), "an answer to a request not sent");
        match result {
            Ok(r) => {
                assert!(r.body.starts_with(b"<http_test><value>"), "{}", String::from_utf8_lossy(&r.body));
                ok += 1;
            }
            Err(e) => *errors.entry(status_of(&e).map_or(e.to_string(), |s| s.name().to_string())).or_default() += 1,
        }
    }
    (sent, ok, errors)
}

#[test]
fn count_process_up_and_down_and_restart_lose_no_request() {
    let core = TestCore::start(&http_req_service(1));
    core.wait_running(1, 1);
    core.wait_subscribed(NAME, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let (socket, s2) = (core.socket.display().to_string(), stop.clone());
    let load = std::thread::spawn(move || sender(socket, s2));
    let handled = || core.get("/v1/services/1")["requests_handled"].as_u64().unwrap();
    let wait_more = |than: u64| {
        let end = Instant::now() + Duration::from_secs(20);
        while handled() < than + 200 {
            assert!(Instant::now() < end, "requests stopped flowing");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    for n in [4, 1, 3, 2] {
        let before = handled();
        let r = core.http("PATCH", "/v1/services/1", Some(&json!({ "count_process": n }).to_string()));
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["count_process"], n);
        let v = core.wait_running(1, n);
        let indexes: Vec<u64> =
            v["processes"].as_array().unwrap().iter().map(|p| p["index"].as_u64().unwrap()).collect();
        assert_eq!(indexes, (0..n).collect::<Vec<_>>(), "the highest indexes stop first");
        wait_more(before);
    }
    let before = handled();
    let r = core.http("POST", "/v1/services/1/restart", None);
    assert_eq!(r.status, 202, "{}", r.body);
    core.wait_service(1, "restarted", |v| {
        v["status"] == "running" && v["processes"].as_array().unwrap().iter().all(|p| p["instances"] == 1)
    });
    wait_more(before);
    stop.store(true, Ordering::Relaxed);
    let (sent, ok, errors) = load.join().unwrap();

    let explicit: u64 = errors.values().sum();
    assert_eq!(sent, ok + explicit, "every request sent was answered or failed explicitly");
    assert!(errors.keys().all(|k| k == "CRASHED" || k == "SHUTTING_DOWN"), "unexpected errors: {errors:?}");
    assert!(ok > 1000, "only {ok} answered");
    eprintln!("sent {sent}, answered {ok}, explicit errors {errors:?}");
    let v = core.get("/v1/services/1");
    assert_eq!(v["restarts"], 0, "scaling and an admin restart are not crashes");
}

#[test]
fn bad_input_gets_clear_errors() {
    let core = TestCore::start("[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n");
    let call = |m: &str, p: &str, b: Option<&str>| {
        let r = core.http(m, p, b);
        let v = r.json();
        (
            r.status,
            v["code"].as_str().unwrap_or("").to_string(),
            v["message"].as_str().unwrap_or("").to_string(),
            r.headers,
        )
    };
    // method, path, body, HTTP status, error code, part of the message
    type Case<'a> = (&'a str, &'a str, Option<&'a str>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        ("POST", "/v1/services", Some("{"), 400, "invalid_json", "not valid JSON"),
        (
            "POST",
            "/v1/services",
            Some(r#"{"prefix": "/a/", "internal": "echo""#),
            400,
            "invalid_json",
            "not valid JSON",
        ),
        (
            "POST",
            "/v1/services",
            Some(r#"{"prefix": "/a/"}"#),
            400,
            "invalid_service",
            "service[0] (/a/).path: give path",
        ),
        (
            "POST",
            "/v1/services",
            Some(r#"[{"prefix": "/a/", "internal": "echo"}, {"prefix": "/b/", "path": "x", "count_process": 0}]"#),
            400,
            "invalid_service",
            "service[1] (/b/).count_process: must be 1 .. 1024",
        ),
        (
            "POST",
            "/v1/services",
            Some(r#"{"prefix": "/a/", "path": "x", "colour": "red"}"#),
            400,
            "invalid_service",
            "unknown field `colour`",
        ),
        (
            "POST",
            "/v1/services",
            Some(r#"{"prefix": "/a/", "internal": "echo", "settings": {"size": 1}}"#),
            400,
            "invalid_service",
            "unknown setting 'size'",
        ),
        (
            "PATCH",
            "/v1/services/1",
            Some(r#"{"count_thread": 2}"#),
            400,
            "invalid_service",
            "cannot change while the service runs",
        ),
        (
            "PATCH",
            "/v1/services/1",
            Some(r#"{"count_process": 0}"#),
            400,
            "invalid_service",
            "count_process: must be 1 .. 1024",
        ),
        (
            "PATCH",
            "/v1/services/1",
            Some(r#"{"dest_refresh": "sometimes"}"#),
            400,
            "invalid_service",
            "unknown variant",
        ),
        ("PATCH", "/v1/services/1", Some("{}"), 400, "invalid_request", "nothing to change"),
        ("PATCH", "/v1/services/9", Some(r#"{"count_process": 2}"#), 404, "not_found", "no service with id 9"),
        ("GET", "/v1/services/abc", None, 404, "not_found", "ids are numbers"),
        ("POST", "/v1/services/9/restart", None, 404, "not_found", "no service with id 9"),
        ("GET", "/v1/nothing", None, 404, "not_found", "no such call"),
        ("PUT", "/v1/services", None, 405, "method_not_allowed", "allowed: GET, POST"),
        ("PUT", "/v1/log-level", Some(r#"{"level": "loud"}"#), 400, "invalid_log_level", "not a log level"),
        ("PUT", "/v1/log-level", Some(r#"{"lvl": "info"}"#), 400, "invalid_json", "expected"),
    ];
    for (m, p, b, status, code, msg) in cases {
        let (s, c, message, headers) = call(m, p, b);
        assert_eq!((s, c.as_str()), (status, code), "{m} {p} {b:?}: {message}");
        assert!(message.contains(msg), "{m} {p}: {msg:?} not in {message:?}");
        if status == 405 {
            assert!(headers.to_ascii_lowercase().contains("allow: get, post"), "{headers}");
        }
    }
    // nothing was added by the refused calls
    assert_eq!(core.get("/v1/services")["services"].as_array().unwrap().len(), 1);
}

#[test]
fn live_options_apply_and_a_crashing_service_fails_then_restarts() {
    let crash = "[[service]]\nprefix = \"/crash/\"\npath = \"sh\"\nargs = [\"-c\", \"exit 3\"]\nmax_r = 1\nrestart_delay = 10\n";
    let core = TestCore::start(&format!("[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n{crash}"));
    let v = core.wait_service(2, "failed", |v| v["status"] == "failed");
    assert_eq!((v["restarts"].as_u64(), v["processes"][0]["state"].as_str()), (Some(1), Some("failed")));
    let m = core.metric("cumulo_process_restarts_total{service=\"/crash/\",service_id=\"2\"}");
    assert_eq!(m, Some(1.0));
    let events = core.log_events();
    let logged = |text: &str| {
        events.iter().any(|e| {
            e["fields"]["message"].as_str().is_some_and(|m| m.contains(text)) && e["fields"]["service_id"] == 2
        })
    };
    assert!(
        logged("process 0 exited with code 3") && logged("restarting process 0") && logged("giving up"),
        "{}",
        core.log_text()
    );

    // an admin restart gives it a fresh max_r budget: one more restart, then it gives up again
    assert_eq!(core.http("POST", "/v1/services/2/restart", None).status, 202);
    core.wait_service(2, "failed again after one more restart", |v| v["status"] == "failed" && v["restarts"] == 2);

    // live options of the echo service: a short sync timeout applies at once
    let r = core.http(
        "PATCH",
        "/v1/services/1",
        Some(r#"{"timeout_sync": 1234, "queue_limit": 7, "dest_refresh": "round_robin"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let c = &r.json()["config"];
    assert_eq!(
        (c["timeout_sync"].as_u64(), c["queue_limit"].as_u64(), c["dest_refresh"].as_str()),
        (Some(1234), Some(7), Some("round_robin"))
    );
    let v: Value = core.http("GET", "/v1/services/1", None).json();
    assert_eq!(v["config"]["timeout_sync"], 1234);
}

#[test]
fn removing_a_service_under_load_fails_nothing_silently() {
    let core = TestCore::start(&http_req_service(2));
    core.wait_running(1, 2);
    core.wait_subscribed(NAME, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let (socket, s2) = (core.socket.display().to_string(), stop.clone());
    let load = std::thread::spawn(move || sender(socket, s2));
    let end = Instant::now() + Duration::from_secs(20);
    while core.get("/v1/services/1")["requests_handled"].as_u64().unwrap() < 500 {
        assert!(Instant::now() < end, "requests stopped flowing");
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = core.http("DELETE", "/v1/services/1", None);
    assert_eq!(r.status, 200, "{}", r.body);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let (sent, ok, errors) = load.join().unwrap();
    let explicit: u64 = errors.values().sum();
    assert_eq!(sent, ok + explicit, "every request sent was answered or failed explicitly");
    assert!(errors.get("NO_SERVICE").is_some_and(|n| *n > 0), "{errors:?}");
    assert!(errors.keys().all(|k| ["NO_SERVICE", "SHUTTING_DOWN", "CRASHED"].contains(&k.as_str())), "{errors:?}");
    eprintln!("sent {sent}, answered {ok}, explicit errors {errors:?}");
}

/// `queue_size` changes on a running service, checked as the config checks
/// it, and applies to its instances' queues from the next request.
#[test]
fn queue_size_changes_live_and_applies_to_the_queues() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/loadgen/slow_service.py");
    let core = TestCore::start(&format!(
        "[[service]]\nprefix = \"/slow/\"\npath = \"python3\"\nargs = [\"{}\"]\nenv = {{ SLOW_DELAY_MS = \"3000\" }}\ntimeout_terminate = 200\n",
        script.display()
    ));
    core.wait_running(1, 1);
    core.wait_subscribed("/slow/slow/get", 1);

    let r = core.http("PATCH", "/v1/services/1", Some(r#"{"queue_size": 100}"#));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("queue_size") && r.body.contains("at least 1024"), "{}", r.body);
    let r = core.http("PATCH", "/v1/services/1", Some(r#"{"queue_size": 2048}"#));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["config"]["queue_size"], 2048);

    // One request occupies the instance (window 1) for 3 s; one of 1500
    // bytes fits in the 2048-byte queue; a second one does not.
    let mut api = core.client("/test/queue_size/");
    let o = SendOptions { timeout: 10_000, ..Default::default() };
    let busy = api.send_async("/slow/slow/get", b"", b"", o);
    let body = vec![b'x'; 1500];
    let queued = api.send_async("/slow/slow/get", b"", &body, o);
    match api.send_sync("/slow/slow/get", b"", &body, o) {
        Err(cumulo::Error::Status { status: Status::QueueFull, message }) => {
            assert!(message.contains("queue_size"), "{message}")
        }
        other => panic!("expected QUEUE_FULL naming queue_size, got {other:?}"),
    }
    for tid in [busy, queued] {
        let (_, r) = api.recv_async(Some(tid), Duration::from_secs(15)).unwrap().expect("answered");
        assert!(r.is_ok(), "{r:?}");
    }
}
