//! The live progress line of `cumulo bench` (stderr, once a second): one
//! line rewritten in place on a terminal, plain lines otherwise. Each
//! second is also kept as a sample for the JSON and HTML reports.

use super::recorder::SharedRecorder;
use super::schedule::{Pace, Schedule};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One second of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the run started, at the end of the sample.
    pub at_s: f64,
    /// The rate asked for then (none when closed loop or paused).
    pub target_rate: Option<f64>,
    /// Successful answers per second.
    pub rate: f64,
    pub errors: u64,
    pub timeouts: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub outstanding: u64,
}

pub struct Progress {
    tty: bool,
    quiet: bool,
    /// A progress line is on screen and must be cleared before other output.
    line_shown: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        Progress { tty: std::io::stderr().is_terminal(), quiet, line_shown: false }
    }

    /// Prints a message above the progress line.
    pub fn say(&mut self, msg: &str) {
        let mut e = std::io::stderr().lock();
        if self.line_shown {
            let _ = write!(e, "\r\x1b[2K");
            self.line_shown = false;
        }
        let _ = writeln!(e, "{msg}");
    }

    fn show(&mut self, s: &Sample, totals: (u64, u64, u64)) {
        if self.quiet {
            return;
        }
        let target = s.target_rate.map(|t| format!(" (target {t:.0})")).unwrap_or_default();
        let line = format!(
            "{:>6.1}s  {:>9.1} req/s{target}  ok {}  errors {}  timeouts {}  p50 {}  p99 {}  outstanding {}",
            s.at_s,
            s.rate,
            totals.0,
            totals.1,
            totals.2,
            human_us(s.p50_us),
            human_us(s.p99_us),
            s.outstanding
        );
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K{line}");
            self.line_shown = true;
        } else {
            let _ = writeln!(e, "{line}");
        }
        let _ = e.flush();
    }

    /// Ends the progress line (before the final report).
    pub fn finish(&mut self) {
        if self.line_shown {
            eprintln!();
            self.line_shown = false;
        }
    }
}

/// "850 us", "12.3 ms", "2.10 s": at least 3 digits, short.
pub fn human_us(us: u64) -> String {
    match us {
        0..=9_999 => format!("{us} us"),
        10_000..=999_999 => format!("{:.1} ms", us as f64 / 1000.0),
        _ => format!("{:.2} s", us as f64 / 1e6),
    }
}

/// Takes a sample every second until the pace is `Stopped`; returns them.
pub async fn sample_loop(
    rec: SharedRecorder,
    mut pace: watch::Receiver<Schedule>,
    started: Instant,
    progress: std::rc::Rc<std::cell::RefCell<Progress>>,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut every = tokio::time::interval_at((started + Duration::from_secs(1)).into(), Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = started;
    loop {
        let stopped = tokio::select! {
            _ = every.tick() => false,
            r = pace.wait_for(|s| s.pace == Pace::Stopped) => { let _ = r; true }
        };
        let now = Instant::now();
        let (w, outstanding, totals) = {
            let mut g = rec.lock();
            (g.take_sample(), g.outstanding, (g.total_ok, g.total_errors, g.total_timeouts))
        };
        let seconds = now.duration_since(last).as_secs_f64();
        last = now;
        let target_rate = match pace.borrow().pace {
            Pace::Rate { rate, .. } => Some(rate),
            _ => None,
        };
        if seconds >= 0.2 {
            let s = Sample {
                at_s: now.duration_since(started).as_secs_f64(),
                target_rate,
                rate: w.ok as f64 / seconds,
                errors: w.errors,
                timeouts: w.timeouts,
                p50_us: w.latency.percentile(50.0),
                p99_us: w.latency.percentile(99.0),
                outstanding,
            };
            progress.borrow_mut().show(&s, totals);
            samples.push(s);
        }
        if stopped {
            progress.borrow_mut().finish();
            return samples;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_units() {
        assert_eq!(super::human_us(850), "850 us");
        assert_eq!(super::human_us(12_345), "12.3 ms");
        assert_eq!(super::human_us(2_100_000), "2.10 s");
    }
}
