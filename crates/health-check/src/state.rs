//! What is known of one host: up, down or not checked yet, since when, and
//! the checks that led there. A host goes down after `down_after` failed
//! checks in a row and comes back up at the first check that passes.

use crate::probe::Failure;
use serde_json::{json, Value};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Unknown,
    Up,
    Down,
}

impl Health {
    pub fn name(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Up => "up",
            Health::Down => "down",
        }
    }
}

/// A change worth telling the `notify` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Down(Failure),
    Up { down_for: Duration },
}

#[derive(Debug)]
pub struct HostState {
    pub health: Health,
    since: Instant,
    since_unix_ms: u64,
    failures_in_a_row: u32,
    pub checks: u64,
    pub failed: u64,
    last_check_unix_ms: Option<u64>,
    last_latency: Option<Duration>,
    last_failure: Option<Failure>,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl HostState {
    pub fn new(now: Instant) -> HostState {
        HostState {
            health: Health::Unknown,
            since: now,
            since_unix_ms: unix_ms(),
            failures_in_a_row: 0,
            checks: 0,
            failed: 0,
            last_check_unix_ms: None,
            last_latency: None,
            last_failure: None,
        }
    }

    fn enter(&mut self, health: Health, now: Instant) {
        self.health = health;
        self.since = now;
        self.since_unix_ms = unix_ms();
    }

    /// Takes a check's result; the change it makes, if any. A host found
    /// up at its first check is no news; found down, it is.
    pub fn record(&mut self, result: Result<Duration, Failure>, now: Instant, down_after: u32) -> Option<Change> {
        self.checks += 1;
        self.last_check_unix_ms = Some(unix_ms());
        match result {
            Ok(latency) => {
                self.failures_in_a_row = 0;
                self.last_latency = Some(latency);
                let was = self.health;
                let down_for = now.saturating_duration_since(self.since);
                if was != Health::Up {
                    self.enter(Health::Up, now);
                }
                (was == Health::Down).then_some(Change::Up { down_for })
            }
            Err(f) => {
                self.failed += 1;
                self.failures_in_a_row += 1;
                self.last_failure = Some(f.clone());
                if self.health != Health::Down && self.failures_in_a_row >= down_after {
                    self.enter(Health::Down, now);
                    return Some(Change::Down(f));
                }
                None
            }
        }
    }

    /// One host of `hosts.json`.
    pub fn view(&self, name: &str, target: &str, now: Instant) -> Value {
        json!({
            "name": name,
            "target": target,
            "state": self.health.name(),
            "since_ms": self.since_unix_ms,
            "for_ms": now.saturating_duration_since(self.since).as_millis() as u64,
            "checks": self.checks,
            "failed": self.failed,
            "failures_in_a_row": self.failures_in_a_row,
            "last_check_ms": self.last_check_unix_ms,
            "last_latency_ms": self.last_latency.map(|d| d.as_secs_f64() * 1000.0),
            "last_error": self.last_failure.as_ref().map(|f| json!({ "kind": f.kind, "why": f.why })),
        })
    }
}
