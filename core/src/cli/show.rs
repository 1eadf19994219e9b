//! `cumulo services show ID` as text: the summary, the patterns the service
//! subscribes, its processes and its configuration.

use super::table::{self, cell};
use serde_json::Value;
use std::fmt::Write;

/// `v`: the `GET /v1/services/{id}` answer; `patterns`: what its instances
/// subscribe, with how many of them subscribe each.
pub fn render(v: &Value, patterns: &[(String, usize)]) -> String {
    let mut o = String::new();
    let r = &v["requests"];
    let _ = writeln!(
        o,
        "service {}: {} ({}: {}), {}",
        cell(&v["id"]),
        cell(&v["prefix"]),
        cell(&v["kind"]),
        cell(&v["program"]),
        cell(&v["status"])
    );
    let _ = writeln!(
        o,
        "processes:  {} of {} each; {} connected, {} requests queued, {}",
        counted(&v["count_process"], "process", "processes"),
        counted(&v["count_thread"], "thread", "threads"),
        counted(&v["instances"], "instance", "instances"),
        cell(&v["queued"]),
        counted(&v["restarts"], "restart", "restarts"),
    );
    let _ = writeln!(
        o,
        "requests:   {} received, {} handled, {} sent, {} errors, {} timeouts",
        cell(&r["received"]),
        cell(&r["handled"]),
        cell(&r["sent"]),
        cell(&r["errors"]),
        cell(&r["timeouts"])
    );
    if let Some(at) = v["added_at"].as_u64() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(at);
        let _ = writeln!(o, "added:      {}", httpdate::fmt_http_date(t));
    }
    let subscribes: Vec<String> =
        patterns.iter().map(|(p, n)| format!("{p} ({})", counted(&(*n).into(), "instance", "instances"))).collect();
    let none = "nothing yet (a service subscribes once its instances have connected)".to_string();
    let _ = writeln!(o, "subscribes: {}", if subscribes.is_empty() { none } else { subscribes.join(", ") });
    if let Some(missing) = v["shards_missing"].as_array().filter(|m| !m.is_empty()) {
        let _ = writeln!(o, "(shards {} did not answer: their counts are missing)", Value::from(missing.clone()));
    }
    let rows: Vec<Vec<String>> = v["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let shards =
                p["shards"].as_array().map_or(String::new(), |l| l.iter().map(cell).collect::<Vec<_>>().join(","));
            vec![
                cell(&p["index"]),
                cell(&p["state"]),
                cell(&p["pid"]),
                cell(&p["instances"]),
                cell(&p["restarts"]),
                shards,
            ]
        })
        .collect();
    o.push('\n');
    o += &table::render(&["PROCESS", "STATE", "PID", "INSTANCES", "RESTARTS", "SHARDS"], &rows);
    o += "\nconfiguration:\n";
    for (k, val) in v["config"].as_object().into_iter().flatten() {
        let empty =
            val.is_null() || val.as_array().is_some_and(Vec::is_empty) || val.as_object().is_some_and(|m| m.is_empty());
        if !empty {
            let _ = writeln!(o, "  {k} = {val}");
        }
    }
    o
}

/// "1 thread", "2 threads".
fn counted(n: &Value, one: &str, many: &str) -> String {
    format!("{} {}", cell(n), if n.as_u64() == Some(1) { one } else { many })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn one_service_in_words() {
        let v = json!({
            "id": 2, "prefix": "/a/", "kind": "external", "program": "bin/a", "status": "running",
            "count_process": 1, "count_thread": 2, "instances": 2, "queued": 0, "restarts": 0,
            "requests": {"received": 5, "handled": 5, "sent": 0, "errors": 0, "timeouts": 0},
            "processes": [{"index": 0, "state": "running", "pid": 42, "instances": 2, "restarts": 0, "shards": [0]}],
            "config": {"timeout_sync": 5000, "dir": null, "args": [], "env": {}},
            "shards_missing": [],
        });
        let t = super::render(&v, &[("/a/x".into(), 2), ("/a/y".into(), 1)]);
        assert!(t.starts_with("service 2: /a/ (external: bin/a), running\n"), "{t}");
        assert!(t.contains("subscribes: /a/x (2 instances), /a/y (1 instance)\n"), "{t}");
        assert!(
            t.contains(
                "processes:  1 process of 2 threads each; 2 instances connected, 0 requests queued, 0 restarts\n"
            ),
            "{t}"
        );
        assert!(t.contains("      0  running   42          2         0       0\n"), "{t}");
        assert!(t.ends_with("configuration:\n  timeout_sync = 5000\n"), "empty keys are left out: {t}");
        assert!(super::render(&v, &[]).contains("subscribes: nothing yet"));
    }
}
