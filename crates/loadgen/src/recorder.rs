//! Where every request's outcome is counted: per tick (what the rate
//! controller judges), per one-second sample (the progress line and the
//! plots), and in total. Shared by the sending lanes behind a mutex; each
//! completion takes it once, briefly.

use super::report::Latencies;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// How one request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// No answer in time (the core's TIMEOUT, or none at all).
    Timeout,
    /// An error status, a failed connection, or an answer that failed the
    /// check: `kind` is what the totals count it under (`CRASHED`,
    /// `NO_SERVICE`, `HTTP 503`, `check`, `connection`), `why` the message.
    Error {
        kind: String,
        why: String,
    },
}

impl Outcome {
    pub fn error(kind: impl Into<String>, why: impl Into<String>) -> Outcome {
        Outcome::Error { kind: kind.into(), why: why.into() }
    }
}

/// Counts of one period.
#[derive(Clone, Default)]
pub struct Window {
    /// Requests due in this period (sent, or dropped for being too late).
    pub scheduled: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    /// Latencies of the successful requests.
    pub latency: Latencies,
    pub first_error: Option<String>,
}

impl Window {
    fn count(&mut self, us: u64, outcome: &Outcome) {
        match outcome {
            Outcome::Ok => {
                self.ok += 1;
                self.latency.record(us);
            }
            Outcome::Timeout => self.timeouts += 1,
            Outcome::Error { why, .. } => {
                self.errors += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(why.clone());
                }
            }
        }
    }

    pub fn merge(&mut self, o: &Window) {
        self.scheduled += o.scheduled;
        self.ok += o.ok;
        self.errors += o.errors;
        self.timeouts += o.timeouts;
        self.latency.merge(&o.latency);
        if self.first_error.is_none() {
            self.first_error = o.first_error.clone();
        }
    }
}

/// The run's accounting. Every request due is counted once: it was sent
/// or not (`not_sent`), and every one sent ended `ok`, in an error, timed
/// out, or is `outstanding` (at the end of a run, what is still outstanding
/// after its timeout and a margin is moved to `unanswered`):
///
///   due  = sent + not_sent
///   sent = ok + errors + timed_out + unanswered + outstanding
///
/// `total_timeouts` is what the tick verdicts count as timeouts:
/// timed_out + not_sent + unanswered.
#[derive(Default)]
pub struct Recorder {
    pub tick: Window,
    pub sample: Window,
    /// Sent and not yet answered.
    pub outstanding: u64,
    pub total_sent: u64,
    pub total_not_sent: u64,
    pub total_ok: u64,
    pub total_errors: u64,
    /// Errors by kind (see `Outcome::Error`).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Answered with a timeout (the core's TIMEOUT; HTTP: the client's own timer).
    pub total_timed_out: u64,
    /// Sent, and no answer at all by the end of the run.
    pub total_unanswered: u64,
    pub total_timeouts: u64,
    /// The run's first error, for the summary (a fixed-rate run judges no tick).
    pub first_error: Option<String>,
}

impl Recorder {
    /// A request left.
    pub fn sent(&mut self) {
        self.outstanding += 1;
        self.total_sent += 1;
        self.tick.scheduled += 1;
        self.sample.scheduled += 1;
    }

    /// A request due so long ago that it was never sent (its lane had no
    /// free slot within the timeout): a timeout, and never outstanding.
    pub fn dropped(&mut self) {
        self.total_not_sent += 1;
        self.tick.scheduled += 1;
        self.sample.scheduled += 1;
        self.finish(0, &Outcome::Timeout);
    }

    /// A sent request ended, `us` after it was due.
    pub fn done(&mut self, us: u64, outcome: &Outcome) {
        self.outstanding = self.outstanding.saturating_sub(1);
        match outcome {
            Outcome::Timeout => self.total_timed_out += 1,
            Outcome::Error { kind, .. } => *self.errors_by_kind.entry(kind.clone()).or_default() += 1,
            Outcome::Ok => {}
        }
        self.finish(us, outcome);
    }

    /// The run is over and its margin past the timeout has passed: what is
    /// still outstanding will never be answered. Counted apart, because a
    /// core must never leave a request it accepted unanswered; and as a
    /// timeout in the verdicts.
    pub fn give_up_outstanding(&mut self) {
        while self.outstanding > 0 {
            self.outstanding -= 1;
            self.total_unanswered += 1;
            self.finish(0, &Outcome::Timeout);
        }
    }

    fn finish(&mut self, us: u64, outcome: &Outcome) {
        self.tick.count(us, outcome);
        self.sample.count(us, outcome);
        match outcome {
            Outcome::Ok => self.total_ok += 1,
            Outcome::Timeout => self.total_timeouts += 1,
            Outcome::Error { why, .. } => {
                self.total_errors += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(why.clone());
                }
            }
        }
    }

    pub fn take_tick(&mut self) -> Window {
        std::mem::take(&mut self.tick)
    }

    pub fn take_sample(&mut self) -> Window {
        std::mem::take(&mut self.sample)
    }
}

/// The recorder as the lanes hold it.
#[derive(Clone, Default)]
pub struct SharedRecorder(Arc<Mutex<Recorder>>);

impl SharedRecorder {
    pub fn lock(&self) -> MutexGuard<'_, Recorder> {
        // A lane that panicked cannot leave the counts half-updated in a
        // way that matters more than losing the run: keep going.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_window_and_in_total() {
        let r = SharedRecorder::default();
        {
            let mut g = r.lock();
            for _ in 0..3 {
                g.sent();
            }
            g.done(100, &Outcome::Ok);
            g.done(200, &Outcome::error("CRASHED", "bad"));
            g.dropped();
        }
        let tick = r.lock().take_tick();
        assert_eq!((tick.scheduled, tick.ok, tick.errors, tick.timeouts), (4, 1, 1, 1));
        assert_eq!(tick.first_error.as_deref(), Some("bad"));
        assert_eq!(tick.latency.count(), 1);
        let g = r.lock();
        assert_eq!(g.outstanding, 1);
        assert_eq!(g.tick.scheduled, 0);
        assert_eq!(g.sample.ok, 1);
        assert_eq!((g.total_ok, g.total_errors, g.total_timeouts), (1, 1, 1));
        assert_eq!(g.first_error.as_deref(), Some("bad"));
        assert_eq!((g.total_sent, g.total_not_sent, g.total_timed_out), (3, 1, 0));
        assert_eq!(g.errors_by_kind.get("CRASHED"), Some(&1));
    }

    #[test]
    fn every_request_is_accounted_for() {
        let mut g = Recorder::default();
        for _ in 0..5 {
            g.sent();
        }
        g.dropped();
        g.done(1, &Outcome::Ok);
        g.done(1, &Outcome::Timeout);
        g.done(1, &Outcome::error("NO_SERVICE", "x"));
        assert_eq!(g.outstanding, 2);
        g.give_up_outstanding();
        assert_eq!(g.outstanding, 0);
        assert_eq!(g.total_unanswered, 2);
        assert_eq!(g.total_sent, g.total_ok + g.total_errors + g.total_timed_out + g.total_unanswered);
        assert_eq!(g.total_timeouts, g.total_timed_out + g.total_not_sent + g.total_unanswered);
    }
}
