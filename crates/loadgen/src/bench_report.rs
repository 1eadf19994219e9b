//! What a `cumulo bench` run found, as one value: printed as the final
//! summary, written as JSON (`--json`) and as an HTML page (`--html`).

use super::controller::FailureCounts;
use super::driver::{Held, RunEnd, TickRecord};
use super::progress::Sample;
use super::report::Latencies;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Every request of the run, accounted for (see `Recorder`):
/// `due = sent + not_sent`, `sent = ok + errors + timed_out + unanswered`,
/// `due = ok + errors + timeouts`.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Requests the schedule called for.
    pub due: u64,
    pub sent: u64,
    /// Due but never sent: no free slot on the connection within the timeout.
    pub not_sent: u64,
    pub ok: u64,
    pub errors: u64,
    /// `CRASHED`, `NO_SERVICE`, `HTTP 503`, `check`, `connection`, ...
    pub errors_by_kind: BTreeMap<String, u64>,
    /// All that counts as a timeout: timed_out + not_sent + unanswered.
    pub timeouts: u64,
    /// Sent, and answered with a timeout.
    pub timed_out: u64,
    /// Sent, and never answered within the timeout and a margin of 1 s
    /// after the run: a request the target lost.
    pub unanswered: u64,
    pub seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

impl Totals {
    /// "1000 sent = 990 ok + 5 errors (CRASHED 5) + 3 timed out + 2 unanswered; 0 not sent"
    pub fn accounting(&self) -> String {
        let kinds = if self.errors_by_kind.is_empty() {
            String::new()
        } else {
            let k: Vec<String> = self.errors_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!(" ({})", k.join(", "))
        };
        format!(
            "{} sent = {} ok + {} errors{kinds} + {} timed out + {} unanswered; {} not sent",
            self.sent, self.ok, self.errors, self.timed_out, self.unanswered, self.not_sent
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub tool: String,
    /// "request" (service requests through a core) or "http".
    pub kind: String,
    /// The service name or the URL.
    pub target: String,
    /// "dynamic", "fixed" or "max".
    pub rate_mode: String,
    pub connections: usize,
    pub command: String,
    pub date: String,
    pub machine: String,
    /// Dynamic: a stable rate was found. Fixed and max: the run had no
    /// errors or timeouts.
    pub success: bool,
    /// The rate that held and its latency report (see `Held`).
    pub result: Option<Held>,
    /// Dynamic: the search's failed ticks by reason (see docs/LOADGEN.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<FailureCounts>,
    /// Dynamic: answers per second of the closed-loop probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_rate: Option<f64>,
    pub totals: Totals,
    pub ticks: Vec<TickRecord>,
    pub samples: Vec<Sample>,
    /// Percentile curve of the result's latencies: [percentile, µs].
    pub latency_curve: Vec<(f64, u64)>,
    /// Latency histogram of the result: [from µs, to µs, count].
    pub latency_histogram: Vec<(u64, u64, u64)>,
}

pub struct Header {
    pub kind: &'static str,
    pub target: String,
    pub rate_mode: &'static str,
    pub connections: usize,
}

impl BenchReport {
    pub fn new(h: Header, end: RunEnd, samples: Vec<Sample>, totals: Totals) -> BenchReport {
        let held_latencies = end.latencies.as_ref();
        let success = match h.rate_mode {
            "dynamic" => end.held.is_some(),
            _ => totals.errors == 0 && totals.timeouts == 0 && end.held.is_some(),
        };
        BenchReport {
            tool: format!("cumulo bench {}", env!("CARGO_PKG_VERSION")),
            kind: h.kind.to_string(),
            target: h.target,
            rate_mode: h.rate_mode.to_string(),
            connections: h.connections,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date: utc_now(),
            machine: machine(),
            success,
            totals,
            search: end.search,
            probe_rate: end.probe_rate,
            ticks: end.ticks,
            samples,
            latency_curve: held_latencies.map(Latencies::curve).unwrap_or_default(),
            latency_histogram: held_latencies.map(|l| l.buckets(40)).unwrap_or_default(),
            result: end.held,
        }
    }

    /// The final summary: the "stable at" (or "held") line and the latency
    /// report in the seed's layout, then the totals.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        match &self.result {
            Some(h) => {
                let _ = writeln!(o, "{}", h.line);
                o.push_str(&h.latency.to_text());
            }
            None => {
                let _ = writeln!(o, "no stable rate found in {:.0} s", self.totals.seconds);
                if let Some(best) = self.ticks.iter().filter(|t| t.failed.is_none()).map(|t| t.rate).reduce(f64::max) {
                    let _ = writeln!(o, "  highest rate in a passing tick: {best:.1} requests/second");
                }
            }
        }
        let _ = writeln!(
            o,
            "\n{} ok, {} errors, {} timeouts in {:.1} s ({}, {} connections, {})",
            self.totals.ok,
            self.totals.errors,
            self.totals.timeouts,
            self.totals.seconds,
            self.target,
            self.connections,
            self.rate_mode
        );
        if let Some(c) = &self.search {
            let probe = self.probe_rate.map(|r| format!("; closed-loop probe {r:.1}/s")).unwrap_or_default();
            let _ = writeln!(o, "{}{probe}", c.line());
            if c.failed() > 0 && c.transient * 2 >= c.failed() {
                let _ = writeln!(
                    o,
                    "  (half or more of the failed ticks passed on retry: the target or the machine stalled)"
                );
            }
        }
        if let Some(e) = &self.totals.first_error {
            let _ = writeln!(o, "first error: {e}");
        }
        let _ = writeln!(o, "accounting: {}", self.totals.accounting());
        o
    }
}

/// "2025-01-31 14:05 UTC", from the system clock (no date crate needed).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// "2 CPUs, Intel(R) Xeon(R) ..., Linux 6.1.0".
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel =
        std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default();
    format!("{cpus} CPUs, {model}, Linux {kernel}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn accounting_line_names_every_part() {
        let t = super::Totals {
            due: 1002,
            sent: 1000,
            not_sent: 2,
            ok: 990,
            errors: 5,
            errors_by_kind: [("CRASHED".to_string(), 4), ("connection".to_string(), 1)].into(),
            timeouts: 7,
            timed_out: 3,
            unanswered: 2,
            seconds: 1.0,
            first_error: Some("CRASHED: gone".into()),
        };
        assert_eq!(
            t.accounting(),
            "1000 sent = 990 ok + 5 errors (CRASHED 4, connection 1) + 3 timed out + 2 unanswered; 2 not sent"
        );
    }

    #[test]
    fn date_is_well_formed() {
        let d = super::utc_now();
        assert_eq!(d.len(), "2025-01-31 14:05 UTC".len(), "{d}");
        assert!(d.starts_with("20"));
    }
}
