//! The load generator (`cumulo bench request`) as a test's sender: it runs
//! as its own process while the test injects faults, and its JSON report
//! accounts for every request it was due to send.

use crate::harness::{cumulo_cmd, Core};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How long the load generator may take beyond its run and the wait for
/// its last answers: its start, its probe request, a busy machine.
const EXIT_SLACK: Duration = Duration::from_secs(20);

/// A running `cumulo bench request` at a fixed rate.
pub struct Load {
    child: Option<Child>,
    json: PathBuf,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
    limit: Duration,
    pub name: String,
}

/// The totals of a run (`totals` of the JSON report, docs/LOADGEN.md).
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub due: u64,
    pub sent: u64,
    pub not_sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    pub timed_out: u64,
    pub unanswered: u64,
}

/// One tick of the run: its end (seconds since the start) and its counts.
#[derive(Debug, Clone)]
pub struct Tick {
    pub at_s: f64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
}

#[derive(Debug, Clone)]
pub struct LoadReport {
    pub name: String,
    pub totals: Totals,
    pub ticks: Vec<Tick>,
}

impl Load {
    /// Sends `rate` requests/second to `name` for `duration` (1 s ticks,
    /// 2 connections), each with `timeout`.
    pub fn start(core: &Core, name: &str, rate: u32, duration: Duration, timeout: Duration) -> Load {
        let tag = name.trim_matches('/').replace('/', "_");
        let json = core.dir.0.join(format!("load-{tag}.json"));
        let out = core.dir.0.join(format!("load-{tag}.out"));
        let err = core.dir.0.join(format!("load-{tag}.err"));
        let child = cumulo_cmd()
            .args(["bench", "request", "--connections", "2", "--tick", "1s"])
            .args(["--socket", &core.socket_str(), "--name", name])
            .args(["--rate", &rate.to_string()])
            .args(["--duration", &format!("{}ms", duration.as_millis())])
            .args(["--timeout", &format!("{}ms", timeout.as_millis())])
            .arg("--json")
            .arg(&json)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start cumulo bench");
        Load {
            child: Some(child),
            json,
            out,
            err,
            started: Instant::now(),
            // The run, then at most timeout + 1 s waiting for stragglers.
            limit: duration + timeout + Duration::from_secs(1) + EXIT_SLACK,
            name: name.to_string(),
        }
    }

    /// Waits until the run is sending: its first request was answered and
    /// its first progress line (one a second) is out. A fault injected
    /// before would fail that first request, and the run with it.
    pub fn wait_running(&self) {
        let deadline = Instant::now() + EXIT_SLACK;
        while !std::fs::read_to_string(&self.err).unwrap_or_default().contains("req/s") {
            assert!(
                Instant::now() < deadline,
                "cumulo bench to {} did not start within {EXIT_SLACK:?}: {}",
                self.name,
                std::fs::read_to_string(&self.err).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the run to end and reads its report. Panics if the load
    /// generator failed to run (exit 2) or did not end in time.
    pub fn finish(mut self) -> LoadReport {
        let mut child = self.child.take().unwrap();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if self.started.elapsed() > self.limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("cumulo bench to {} did not end within {:?}", self.name, self.limit);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let err = std::fs::read_to_string(&self.err).unwrap_or_default();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        assert!(
            status.code() == Some(0) || status.code() == Some(1),
            "cumulo bench to {} failed ({status}):\n{text}{err}",
            self.name
        );
        let json = std::fs::read_to_string(&self.json)
            .unwrap_or_else(|e| panic!("no report {}: {e}\n{text}{err}", self.json.display()));
        let v: Value = serde_json::from_str(&json).expect("a JSON report");
        let report = LoadReport::from_json(&self.name, &v);
        eprintln!("load to {}: {:?}", self.name, report.totals);
        report
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no number '{key}' in {v}"))
}

impl LoadReport {
    fn from_json(name: &str, v: &Value) -> LoadReport {
        let t = &v["totals"];
        let totals = Totals {
            due: n(t, "due"),
            sent: n(t, "sent"),
            not_sent: n(t, "not_sent"),
            ok: n(t, "ok"),
            errors: n(t, "errors"),
            errors_by_kind: t["errors_by_kind"]
                .as_object()
                .expect("errors_by_kind")
                .iter()
                .map(|(k, c)| (k.clone(), c.as_u64().unwrap()))
                .collect(),
            timed_out: n(t, "timed_out"),
            unanswered: n(t, "unanswered"),
        };
        let ticks = v["ticks"]
            .as_array()
            .expect("ticks")
            .iter()
            .map(|t| Tick {
                at_s: t["at_s"].as_f64().unwrap(),
                ok: n(t, "ok"),
                errors: n(t, "errors"),
                timeouts: n(t, "timeouts"),
            })
            .collect();
        LoadReport { name: name.to_string(), totals, ticks }
    }

    /// Every request is accounted for, and none was left without an answer
    /// past its timeout: due = sent + not sent; sent = ok + errors + timed
    /// out + unanswered; unanswered = 0.
    pub fn assert_accounted(&self) {
        let t = &self.totals;
        assert!(t.sent > 0, "{}: nothing was sent: {t:?}", self.name);
        assert_eq!(t.due, t.sent + t.not_sent, "{}: {t:?}", self.name);
        assert_eq!(t.sent, t.ok + t.errors + t.timed_out + t.unanswered, "{}: {t:?}", self.name);
        assert_eq!(t.errors, t.errors_by_kind.values().sum::<u64>(), "{}: {t:?}", self.name);
        assert_eq!(t.unanswered, 0, "{}: requests left without an answer past their timeout: {t:?}", self.name);
    }

    /// Errors of a kind (`CRASHED`, `NO_SERVICE`, ...).
    pub fn errors(&self, kind: &str) -> u64 {
        self.totals.errors_by_kind.get(kind).copied().unwrap_or(0)
    }

    /// Asserts every error is of one of `kinds`.
    pub fn assert_error_kinds(&self, kinds: &[&str]) {
        for k in self.totals.errors_by_kind.keys() {
            assert!(kinds.contains(&k.as_str()), "{}: unexpected error kind {k}: {:?}", self.name, self.totals);
        }
    }
}
