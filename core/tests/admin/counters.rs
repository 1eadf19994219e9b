//! One definition per counter: known traffic through an HTTP gateway (which
//! crosses shards with `core.threads` = 2) gives the same requests,
//! timeouts, NO_SERVICE and late answers in `cumulo status`, `/metrics`,
//! the dashboard's feed and the line the core logs when it stops.

use crate::common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

fn services(port: u16) -> String {
    format!(
        "[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n\
         [[service]]\nprefix = \"/\"\ninternal = \"http\"\n[service.settings]\nport = {port}\ntimeout_ms = 300\n"
    )
}

/// A number after `label` in `cumulo status` text (`... 3 timeouts, ...`).
fn status_figure(text: &str, label: &str) -> u64 {
    let line = text.lines().find(|l| l.starts_with("totals:")).unwrap_or_else(|| panic!("no totals in\n{text}"));
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let at = words.iter().position(|w| *w == label).unwrap_or_else(|| panic!("no '{label}' in {line}"));
    words[at - 1].parse().unwrap_or_else(|_| panic!("no figure before '{label}' in {line}"))
}

/// A figure of the line logged at exit (`stopped; requests 12, ...`).
fn stopped_figure(line: &str, label: &str) -> u64 {
    let rest = line.split(&format!("{label} ")).nth(1).unwrap_or_else(|| panic!("no '{label}' in {line}"));
    rest.split([',', '"', ' ']).next().unwrap().parse().unwrap()
}

fn counters_agree(threads: u32) {
    let port = free_port();
    let mut core = TestCore::start_threads(&services(port), threads);
    core.wait_running(1, 1);
    core.wait_running(2, threads as u64); // the gateway: an instance on each shard
                                          // An instance that subscribes and never reads: its request times out.
    let mut silent = core.client("/silent/");
    silent.subscribe("x/get", |_, _| Ok(cumulo::Answer::body(""))).unwrap();
    core.wait_subscribed("/silent/x/get", 1);
    core.wait_subscribed("/e/*", 1);

    let (ok, missing) = (20, 5);
    for _ in 0..ok {
        assert_eq!(raw_http(port, "GET", "/e/x", None, None).unwrap().status, 200);
    }
    for _ in 0..missing {
        assert_eq!(raw_http(port, "GET", "/nobody/x", None, None).unwrap().status, 404);
    }
    assert_eq!(raw_http(port, "GET", "/silent/x", None, None).unwrap().status, 504);
    // The silent instance answers now, late.
    let end = std::time::Instant::now() + Duration::from_secs(2);
    while std::time::Instant::now() < end {
        silent.poll(Some(Duration::from_millis(50))).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1200)); // every shard has reported (its report is refreshed each second)

    let want = |what: &str, got: u64, n: u64| assert_eq!(got, n, "threads {threads}: {what}");
    // The admin API (what `cumulo status` prints) ...
    let node = core.get("/v1/status");
    let t = &node["totals"];
    let requests = t["requests"].as_u64().unwrap();
    want("requests (each once, on whichever shards)", requests, ok + missing + 1);
    want("timeouts", t["timeouts"].as_u64().unwrap(), 1);
    want("late", t["late"].as_u64().unwrap(), 1);
    want("no_service", t["no_service"].as_u64().unwrap(), missing);
    // ... `cumulo status` itself ...
    let url = core.url();
    let out = Command::new(CUMULO).args(["status", "--admin", &url]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    want("status requests", status_figure(&text, "requests"), requests);
    want("status timeouts", status_figure(&text, "timeouts"), 1);
    want("status late", status_figure(&text, "late"), 1);
    want("status no_service", status_figure(&text, "no_service"), missing);
    // ... /metrics ...
    let m = core.http("GET", "/metrics", None).body;
    let v = |s: &str| metric_in(&m, s).unwrap_or_else(|| panic!("{s} not in /metrics")) as u64;
    want("cumulo_requests_total", v("cumulo_requests_total"), requests);
    want("cumulo_timeouts_total", v("cumulo_timeouts_total"), 1);
    want("cumulo_late_responses_total", v("cumulo_late_responses_total"), 1);
    want("cumulo_no_service_total", v("cumulo_no_service_total"), missing);
    let per_shard: u64 = (0..threads).map(|s| v(&format!("cumulo_shard_requests_total{{shard=\"{s}\"}}"))).sum();
    want("cumulo_shard_requests_total summed", per_shard, requests);
    // ... the dashboard's feed ...
    let d: Value = core.get("/v1/stats");
    want("dashboard requests", d["requests"].as_u64().unwrap(), requests);
    want("dashboard timeouts", d["timeouts"].as_u64().unwrap(), 1);
    want("dashboard no_service", d["no_service"].as_u64().unwrap(), missing);
    // ... and the line logged at exit, every shard's counters in one.
    core.sigterm();
    assert!(core.wait_exit(Duration::from_secs(15)).success());
    let log = core.log_text();
    let stopped = log.lines().filter(|l| l.contains("stopped; requests")).collect::<Vec<_>>();
    assert_eq!(stopped.len(), 1, "one line at exit:\n{log}");
    want("exit requests", stopped_figure(stopped[0], "requests"), requests);
    want("exit timeouts", stopped_figure(stopped[0], "timeouts"), 1);
    want("exit late", stopped_figure(stopped[0], "late"), 1);
    want("exit no_service", stopped_figure(stopped[0], "no_service"), missing);
}

#[test]
fn status_metrics_dashboard_and_the_exit_line_agree_on_one_thread() {
    counters_agree(1);
}

#[test]
fn status_metrics_dashboard_and_the_exit_line_agree_on_two_threads() {
    counters_agree(2);
}
