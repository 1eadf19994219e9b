//! What the cron service shows: per job, its next event and what its
//! events came to (fired, answered OK, failed, missed, how late), as JSON
//! (`<prefix>jobs.json/get`, the admin API's reports) and `/metrics`.

use crate::settings::Settings;
use cumulo_service::{Metric, MetricKind, Report, ServiceError, Status};
use jiff::Timestamp;
use std::cell::Cell;
use std::rc::Rc;

/// One job's counters, on this instance.
#[derive(Default)]
pub struct JobCounters {
    /// Whether this instance runs the job (jobs are spread over processes).
    pub here: Cell<bool>,
    pub next: Cell<Option<Timestamp>>,
    pub last: Cell<Option<Timestamp>>,
    pub fired: Cell<u64>,
    pub ok: Cell<u64>,
    pub failed: Cell<u64>,
    /// Events skipped because the service was not running at their time
    /// (a stall, a suspended machine, the clock set forward).
    pub missed: Cell<u64>,
    pub late_ms_last: Cell<u64>,
    pub late_ms_max: Cell<u64>,
    pub late_ms_sum: Cell<u64>,
}

impl JobCounters {
    pub fn answered(&self, status: Status) {
        let c = if status == Status::Ok { &self.ok } else { &self.failed };
        c.set(c.get() + 1);
    }
}

pub struct CronReport {
    pub prefix: String,
    pub settings: Rc<Settings>,
    pub jobs: Rc<[JobCounters]>,
}

fn rfc3339(t: Option<Timestamp>) -> serde_json::Value {
    t.map_or(serde_json::Value::Null, |t| t.to_string().into())
}

impl CronReport {
    pub fn jobs_json(&self) -> serde_json::Value {
        let jobs: Vec<serde_json::Value> = self
            .settings
            .jobs
            .iter()
            .zip(self.jobs.iter())
            .filter(|(_, c)| c.here.get())
            .map(|(j, c)| {
                serde_json::json!({
                    "name": j.name,
                    "schedule": j.schedule.fields(),
                    "dest": j.dest,
                    "mcast": j.mcast,
                    "next": rfc3339(c.next.get()),
                    "last": rfc3339(c.last.get()),
                    "fired": c.fired.get(),
                    "ok": c.ok.get(),
                    "failed": c.failed.get(),
                    "missed": c.missed.get(),
                    "late_ms_last": c.late_ms_last.get(),
                    "late_ms_max": c.late_ms_max.get(),
                })
            })
            .collect();
        serde_json::json!({
            "prefix": self.prefix,
            "timezone": self.settings.timezone_name,
            "via": self.settings.via,
            "jobs": jobs,
        })
    }
}

impl Report for CronReport {
    fn kind(&self) -> &'static str {
        "cron"
    }

    fn id(&self) -> String {
        self.prefix.clone()
    }

    fn view(&self) -> serde_json::Value {
        self.jobs_json()
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        use MetricKind::{Counter, Gauge};
        for (j, c) in self.settings.jobs.iter().zip(self.jobs.iter()).filter(|(_, c)| c.here.get()) {
            let mut put = |name, help, kind, value: f64| {
                let labels = vec![("cron", self.prefix.clone()), ("job", j.name.clone())];
                out.push(Metric { name, help, kind, labels, value })
            };
            put("cron_fired_total", "Events of a cron job that sent their request.", Counter, c.fired.get() as f64);
            put("cron_ok_total", "Requests of a cron job answered OK.", Counter, c.ok.get() as f64);
            put(
                "cron_failed_total",
                "Requests of a cron job that failed (an error status, a timeout, no service).",
                Counter,
                c.failed.get() as f64,
            );
            put(
                "cron_missed_total",
                "Events of a cron job skipped because the service was not running at their time.",
                Counter,
                c.missed.get() as f64,
            );
            put(
                "cron_late_seconds_total",
                "Sum over a cron job's events of how late each was sent.",
                Counter,
                c.late_ms_sum.get() as f64 / 1000.0,
            );
            put(
                "cron_late_seconds_max",
                "The latest a cron job's event was sent.",
                Gauge,
                c.late_ms_max.get() as f64 / 1000.0,
            );
        }
    }

    fn operate(&self, op: &str, _args: &serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        match op {
            "jobs" => Ok(self.jobs_json()),
            _ => {
                Err(ServiceError::new(Status::InvalidArgument, format!("cron: unknown operation '{op}' (known: jobs)")))
            }
        }
    }
}
