//! `GET /metrics` follows what really happens: requests answered, timed
//! out, refused; instances up; process CPU and memory.

use crate::common::*;
use cumulo::{SendOptions, Status};
use std::collections::HashSet;

#[test]
fn metrics_move_as_requests_flow() {
    let core = TestCore::start(&format!("{}[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n", http_req_service(1)));
    core.wait_running(1, 1);
    core.wait_subscribed("/tests/http_req/rust.xml/get", 1);
    let http = "service=\"/tests/http_req/\",service_id=\"1\"";
    let echo = "service=\"/e/\",service_id=\"2\"";
    let unmanaged = "service=\"unmanaged\",service_id=\"unmanaged\"";
    let m = |name: &str, labels: &str| core.metric(&format!("{name}{{{labels}}}"));
    assert_eq!(m("cumulo_requests_received_total", http), Some(0.0));
    assert_eq!(m("cumulo_instances_up", http), Some(1.0));
    assert_eq!(m("cumulo_instances_up", echo), Some(1.0));

    let mut client = core.client("/test/client/");
    for n in 0..50 {
        client.send_sync("/tests/http_req/rust.xml/get", b"", &value_request(n), SendOptions::default()).unwrap();
    }
    for _ in 0..10 {
        client.send_sync("/e/x", b"", b"hello", SendOptions::default()).unwrap();
    }
    let e = client.send_sync("/nobody/here", b"", b"", SendOptions::default()).unwrap_err();
    assert!(matches!(e, cumulo::Error::Status { status: Status::NoService, .. }));
    // an instance that subscribes and never answers: the request times out
    let mut silent = core.client("/silent/");
    silent.subscribe("x", |_, _| Ok(cumulo::Answer::body(""))).unwrap();
    let e = client.send_sync("/silent/x", b"", b"", SendOptions { timeout: 100, ..Default::default() }).unwrap_err();
    assert!(matches!(e, cumulo::Error::Status { status: Status::Timeout, .. }), "{e}");

    let text = core.http("GET", "/metrics", None).body;
    let v = |sample: &str| metric_in(&text, sample).unwrap_or_else(|| panic!("{sample} not in\n{text}"));
    assert_eq!(v(&format!("cumulo_requests_received_total{{{http}}}")), 50.0);
    assert_eq!(v(&format!("cumulo_responses_total{{{http},status=\"OK\"}}")), 50.0);
    assert_eq!(v(&format!("cumulo_request_duration_seconds_count{{{http}}}")), 50.0);
    assert_eq!(v(&format!("cumulo_request_duration_seconds_bucket{{{http},le=\"+Inf\"}}")), 50.0);
    assert!(v(&format!("cumulo_request_duration_seconds_sum{{{http}}}")) > 0.0);
    assert_eq!(v(&format!("cumulo_responses_total{{{echo},status=\"OK\"}}")), 10.0);
    assert_eq!(v(&format!("cumulo_requests_sent_total{{{unmanaged}}}")), 62.0);
    assert_eq!(v(&format!("cumulo_request_timeouts_total{{{unmanaged}}}")), 1.0);
    assert_eq!(v(&format!("cumulo_request_errors_total{{{unmanaged},status=\"TIMEOUT\"}}")), 1.0);
    assert_eq!(v(&format!("cumulo_instances_up{{{unmanaged}}}")), 2.0);
    assert_eq!(v(&format!("cumulo_queue_depth{{{http}}}")), 0.0);
    assert_eq!(v("cumulo_no_service_total"), 1.0);
    assert_eq!(v("cumulo_slow_consumers_total"), 0.0);
    assert_eq!(v("cumulo_protocol_errors_total"), 0.0);
    assert!(v("process_cpu_seconds_total") >= 0.0, "present (clock-tick resolution: a quiet core may show 0)");
    assert!(v("process_resident_memory_bytes") > 1e5);

    // the text format: every sample belongs to a family announced by HELP
    // and TYPE just before it, each family once
    let mut families = HashSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            current = it.next().unwrap().to_string();
            assert!(families.insert(current.clone()), "{current} twice");
            assert!(["counter", "gauge", "histogram"].contains(&it.next().unwrap()));
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| *f == current)
                .unwrap_or(name);
            assert_eq!(family, current, "{line}");
            assert!(line.rsplit(' ').next().unwrap().parse::<f64>().is_ok(), "{line}");
        }
    }
    assert!(families.contains("cumulo_request_duration_seconds") && families.contains("cumulo_process_restarts_total"));
}
