//! The dynamic rate search: find the highest request rate the target holds
//! without errors, timeouts or runaway latency, and confirm it holds for
//! `stable_ticks` ticks in a row.
//!
//! Each tick is judged. While ticks pass, the rate doubles (growth); the
//! first failure brackets the answer between the last passing rate and the
//! failing one, and the search bisects that bracket until it is within
//! `precision`; then it holds the lower end. A failure while holding lowers
//! the bracket and the search goes on. After a failure the lanes pause until
//! what is outstanding has drained, so the next tick measures its own rate,
//! not the backlog of the last one.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DynamicSettings {
    /// First rate tried, requests/second.
    pub start_rate: f64,
    /// Passing ticks in a row at one rate to call it stable.
    pub stable_ticks: u32,
    /// The search stops refining when the bracket is this narrow (relative).
    pub precision: f64,
    /// A tick fails when its p99 latency exceeds this; by default 10 times
    /// the lowest p99 of a passing tick, and never below `latency_floor`.
    pub latency_limit: Option<Duration>,
    pub latency_floor: Duration,
    /// No rate above this is tried.
    pub max_rate: Option<f64>,
}

impl Default for DynamicSettings {
    fn default() -> Self {
        DynamicSettings {
            start_rate: 100.0,
            stable_ticks: 24,
            precision: 0.05,
            latency_limit: None,
            latency_floor: Duration::from_millis(20),
            max_rate: None,
        }
    }
}

/// Lowest rate the search goes down to.
pub const MIN_RATE: f64 = 1.0;

/// What happened during one tick.
#[derive(Debug, Clone)]
pub struct TickOutcome {
    pub rate: f64,
    pub seconds: f64,
    pub scheduled: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub p99_us: u64,
    pub first_error: Option<String>,
}

impl TickOutcome {
    /// Answered successfully, per second.
    pub fn measured_rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ok as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// The search's decision after a tick.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Keep the rate (a hold in progress, or the rate is already stable).
    Hold,
    /// Go to a new rate; `drain` first when the last tick overloaded.
    Change { rate: f64, drain: bool },
    /// The rate held for `stable_ticks` ticks: measured rates over them.
    Stable { rate: f64, mean: f64, min: f64, max: f64 },
}

pub struct Dynamic {
    s: DynamicSettings,
    rate: f64,
    /// Highest rate that passed, lowest that failed.
    lo: Option<f64>,
    hi: Option<f64>,
    /// Measured rates of the passing ticks in a row at this rate.
    held: Vec<f64>,
    /// Lowest p99 of a passing tick: the latency reference.
    p99_reference: Option<u64>,
    stable: bool,
    /// The current rate already had its second chance.
    retried: bool,
}

impl Dynamic {
    pub fn new(s: DynamicSettings) -> Dynamic {
        let rate = clamp(s.start_rate.max(MIN_RATE), s.max_rate);
        Dynamic { s, rate, lo: None, hi: None, held: Vec::new(), p99_reference: None, stable: false, retried: false }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn is_stable(&self) -> bool {
        self.stable
    }

    /// Passing ticks in a row at the current rate.
    pub fn held_ticks(&self) -> usize {
        self.held.len()
    }

    pub fn latency_limit_us(&self) -> Option<u64> {
        if let Some(l) = self.s.latency_limit {
            return Some(l.as_micros() as u64);
        }
        let floor = self.s.latency_floor.as_micros() as u64;
        self.p99_reference.map(|r| (r * 10).max(floor))
    }

    /// Why a tick failed, or None if it passed.
    pub fn judge(&self, t: &TickOutcome) -> Option<String> {
        if t.timeouts > 0 || t.errors > 0 {
            let first = t.first_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default();
            return Some(format!("{} errors, {} timeouts{first}", t.errors, t.timeouts));
        }
        // A backlog growing in the target (or a sender that cannot keep up)
        // shows as answers falling behind the schedule.
        let due = (t.rate * t.seconds).max(t.scheduled as f64);
        if (t.ok as f64) < 0.95 * due {
            return Some(format!("only {} of {:.0} requests answered within the tick", t.ok, due));
        }
        if let Some(limit) = self.latency_limit_us() {
            if t.p99_us > limit {
                return Some(format!("p99 latency {} us above the limit of {} us", t.p99_us, limit));
            }
        }
        None
    }

    pub fn on_tick(&mut self, t: &TickOutcome) -> (Step, Option<String>) {
        let why = self.judge(t);
        let hard = t.errors > 0 || t.timeouts > 0;
        let step = match why {
            None => self.passed(t),
            // Latency and backlog are at the mercy of whatever else the
            // machine runs: one such failure gets the same rate again
            // (after a drain) before it counts. Errors and timeouts count
            // at once.
            Some(_) if !hard && !self.retried => {
                self.retried = true;
                self.held.clear();
                Step::Change { rate: self.rate, drain: true }
            }
            Some(_) => self.failed(),
        };
        (step, why)
    }

    fn passed(&mut self, t: &TickOutcome) -> Step {
        // The lowest so far, not just the first: a first tick slowed by
        // warm-up (or a busy machine) would otherwise allow anything.
        self.p99_reference = Some(self.p99_reference.map_or(t.p99_us, |r| r.min(t.p99_us)).max(1));
        self.held.push(t.measured_rate());
        self.lo = Some(self.lo.map_or(self.rate, |lo| lo.max(self.rate)));
        if self.stable {
            return Step::Hold;
        }
        let at_ceiling = self.s.max_rate.is_some_and(|m| self.rate >= m);
        let next = match self.hi {
            _ if at_ceiling => None,
            None => Some(self.rate * 2.0),
            Some(hi) if (hi - self.rate) / self.rate > self.s.precision => Some(0.5 * (self.rate + hi)),
            Some(_) => None,
        };
        if let Some(next) = next {
            return self.change(clamp(next, self.s.max_rate), false);
        }
        if self.held.len() >= self.s.stable_ticks as usize {
            self.stable = true;
            let mean = self.held.iter().sum::<f64>() / self.held.len() as f64;
            let min = self.held.iter().copied().fold(f64::INFINITY, f64::min);
            let max = self.held.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            return Step::Stable { rate: self.rate, mean, min, max };
        }
        Step::Hold
    }

    fn failed(&mut self) -> Step {
        self.stable = false;
        self.hi = Some(self.hi.map_or(self.rate, |hi| hi.min(self.rate)));
        let hi = self.rate;
        let next = match self.lo {
            // It passed before at this rate or above: back off below it.
            Some(lo) if lo >= hi => {
                self.lo = None;
                hi * 0.8
            }
            Some(lo) if (hi - lo) / lo > self.s.precision => 0.5 * (lo + hi),
            Some(lo) => lo,
            None => hi * 0.5,
        };
        self.change(next.max(MIN_RATE), true)
    }

    fn change(&mut self, rate: f64, drain: bool) -> Step {
        self.held.clear();
        self.retried = false;
        self.rate = rate;
        Step::Change { rate, drain }
    }
}

fn clamp(rate: f64, max: Option<f64>) -> f64 {
    max.map_or(rate, |m| rate.min(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target that answers up to `capacity` requests/second, with latency
    /// exploding beyond it.
    fn tick(rate: f64, capacity: f64) -> TickOutcome {
        let served = rate.min(capacity);
        TickOutcome {
            rate,
            seconds: 1.0,
            scheduled: rate as u64,
            ok: served as u64,
            errors: 0,
            timeouts: if rate > capacity * 1.02 { 1 } else { 0 },
            p99_us: if rate > capacity { 1_000_000 } else { 1_000 },
            first_error: None,
        }
    }

    #[test]
    fn finds_a_rate_just_under_the_capacity_and_holds_it() {
        let capacity = 3170.0;
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 5, ..Default::default() });
        let mut ticks = 0;
        let stable = loop {
            ticks += 1;
            assert!(ticks < 100, "no stable rate after 100 ticks");
            if let (Step::Stable { rate, .. }, _) = d.on_tick(&tick(d.rate(), capacity)) {
                break rate;
            }
        };
        assert!(stable <= capacity && stable > capacity * 0.9, "stable at {stable}");
        assert!(d.is_stable());
        assert_eq!(d.on_tick(&tick(d.rate(), capacity)).0, Step::Hold);
    }

    #[test]
    fn a_failure_while_holding_backs_off_and_searches_again() {
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 2, start_rate: 1000.0, ..Default::default() });
        while !matches!(d.on_tick(&tick(d.rate(), 1500.0)).0, Step::Stable { .. }) {}
        let held = d.rate();
        // the target slows down to half
        let (step, why) = d.on_tick(&tick(held, 700.0));
        assert!(why.is_some());
        assert!(matches!(step, Step::Change { drain: true, rate } if rate < held));
        let mut n = 0;
        while !matches!(d.on_tick(&tick(d.rate(), 700.0)).0, Step::Stable { .. }) {
            n += 1;
            assert!(n < 100);
        }
        assert!(d.rate() <= 700.0 && d.rate() > 600.0, "{}", d.rate());
    }

    #[test]
    fn one_slow_tick_gets_a_second_chance_an_error_does_not() {
        let mut d = Dynamic::new(DynamicSettings { start_rate: 1000.0, ..Default::default() });
        d.on_tick(&tick(1000.0, 1e9));
        let mut slow = tick(2000.0, 1e9);
        slow.p99_us = 1_000_000;
        assert_eq!(d.on_tick(&slow).0, Step::Change { rate: 2000.0, drain: true });
        assert!(matches!(d.on_tick(&slow).0, Step::Change { rate, drain: true } if rate < 2000.0));
        let mut d = Dynamic::new(DynamicSettings { start_rate: 1000.0, ..Default::default() });
        let mut failing = tick(1000.0, 1e9);
        failing.errors = 1;
        assert_eq!(d.on_tick(&failing).0, Step::Change { rate: 500.0, drain: true });
    }

    #[test]
    fn errors_and_slow_answers_fail_a_tick() {
        let d = Dynamic::new(DynamicSettings { latency_limit: Some(Duration::from_millis(2)), ..Default::default() });
        let mut t = tick(100.0, 1000.0);
        assert_eq!(d.judge(&t), None);
        t.errors = 1;
        t.first_error = Some("NO_SERVICE".into());
        assert!(d.judge(&t).unwrap().contains("NO_SERVICE"));
        let mut t = tick(100.0, 1000.0);
        t.p99_us = 2_001;
        assert!(d.judge(&t).unwrap().contains("p99"));
        let mut t = tick(100.0, 1000.0);
        t.ok = 80;
        assert!(d.judge(&t).unwrap().contains("80 of 100"));
    }

    #[test]
    fn never_goes_above_max_or_below_min() {
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 1, max_rate: Some(300.0), ..Default::default() });
        for _ in 0..10 {
            d.on_tick(&tick(d.rate(), 1e9));
            assert!(d.rate() <= 300.0);
        }
        let mut d = Dynamic::new(DynamicSettings::default());
        for _ in 0..20 {
            d.on_tick(&tick(d.rate(), 0.0));
            assert!(d.rate() >= MIN_RATE);
        }
    }
}
