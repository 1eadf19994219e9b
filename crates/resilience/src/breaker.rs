//! A circuit breaker: closed (requests pass, outcomes counted), open
//! (every request refused at once, for `open`), half-open (a few probes
//! pass; the first probe's success closes it, a failed one opens it again).

use crate::policy::BreakerSettings;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn name(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// What the breaker says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Closed: it goes, its outcome counts.
    Pass,
    /// Half-open: it goes as a probe; its outcome decides.
    Probe,
    /// Open (or half-open with its probes out): refused; the breaker lets
    /// probes through in this long.
    Refused(Duration),
}

#[derive(Debug)]
pub struct Breaker {
    state: BreakerState,
    /// Failures in a row while closed.
    consecutive: u32,
    /// The last outcomes while closed (true: failed), for the ratio.
    window: VecDeque<bool>,
    failures_in_window: u32,
    /// Open until; half-open since.
    until: Instant,
    since: Instant,
    probes_out: u32,
    trips: u64,
    refused: u64,
}

impl Breaker {
    pub fn new(now: Instant) -> Breaker {
        Breaker {
            state: BreakerState::Closed,
            consecutive: 0,
            window: VecDeque::new(),
            failures_in_window: 0,
            until: now,
            since: now,
            probes_out: 0,
            trips: 0,
            refused: 0,
        }
    }

    /// The state at `now` (an open breaker whose time is up is half-open).
    pub fn state(&self, now: Instant) -> BreakerState {
        match self.state {
            BreakerState::Open if now >= self.until => BreakerState::HalfOpen,
            s => s,
        }
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }

    /// Times it opened.
    pub fn trips(&self) -> u64 {
        self.trips
    }

    /// Requests it refused.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// How long until an open breaker lets probes through (zero otherwise).
    pub fn opens_in(&self, now: Instant) -> Duration {
        match self.state {
            BreakerState::Open => self.until.saturating_duration_since(now),
            _ => Duration::ZERO,
        }
    }

    #[inline]
    pub fn admit(&mut self, s: &BreakerSettings, now: Instant) -> Admission {
        match self.state {
            BreakerState::Closed => return Admission::Pass,
            BreakerState::Open if now < self.until => {
                self.refused += 1;
                return Admission::Refused(self.until - now);
            }
            BreakerState::Open => {
                self.state = BreakerState::HalfOpen;
                self.since = now;
                self.probes_out = 0;
            }
            BreakerState::HalfOpen => {}
        }
        // A probe whose outcome never came (its sender left, the core
        // dropped it) must not hold the breaker half-open for ever: after
        // another `open`, probes go again.
        if now.saturating_duration_since(self.since) >= s.open {
            self.since = now;
            self.probes_out = 0;
        }
        if self.probes_out < s.half_open_requests {
            self.probes_out += 1;
            Admission::Probe
        } else {
            self.refused += 1;
            Admission::Refused(Duration::ZERO)
        }
    }

    /// Counts one outcome; returns the new state when it changed.
    pub fn record(&mut self, s: &BreakerSettings, failed: bool, probe: bool, now: Instant) -> Option<BreakerState> {
        match (self.state, probe) {
            (BreakerState::Closed, false) => {
                self.consecutive = if failed { self.consecutive + 1 } else { 0 };
                if s.failure_ratio > 0.0 {
                    self.window.push_back(failed);
                    self.failures_in_window += failed as u32;
                    if self.window.len() > s.window as usize {
                        self.failures_in_window -= self.window.pop_front().unwrap_or(false) as u32;
                    }
                }
                let by_count = s.consecutive_failures > 0 && self.consecutive >= s.consecutive_failures;
                let by_ratio = s.failure_ratio > 0.0
                    && self.window.len() >= s.window as usize
                    && self.failures_in_window as f64 >= s.failure_ratio * s.window as f64;
                (by_count || by_ratio).then(|| self.open(s, now))
            }
            (BreakerState::HalfOpen, true) if failed => Some(self.open(s, now)),
            (BreakerState::HalfOpen, true) => {
                self.close();
                Some(BreakerState::Closed)
            }
            // Outcomes of requests let through before it opened, and
            // late probes, decide nothing.
            _ => None,
        }
    }

    fn open(&mut self, s: &BreakerSettings, now: Instant) -> BreakerState {
        self.state = BreakerState::Open;
        self.until = now + s.open;
        self.trips += 1;
        self.consecutive = 0;
        self.window.clear();
        self.failures_in_window = 0;
        BreakerState::Open
    }

    fn close(&mut self) {
        self.state = BreakerState::Closed;
        self.consecutive = 0;
        self.window.clear();
        self.failures_in_window = 0;
        self.probes_out = 0;
    }

    /// Closed by hand (the admin API).
    pub fn reset(&mut self) {
        self.close();
    }
}
