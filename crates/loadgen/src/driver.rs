//! The tick loop shared by `cumulo bench` and the request_rate service: it
//! sets the pace, and at the end of every tick collects what the lanes
//! recorded, judges it (dynamic mode) or reports it (fixed mode), and sets
//! the next pace. The lanes that send are elsewhere; they only read the pace
//! and write the recorder.

use super::controller::{Dynamic, DynamicSettings, FailKind, FailureCounts, Step, TickOutcome};
use super::recorder::{SharedRecorder, Window};
use super::report::{stable_line, Latencies, LatencyReport};
use super::schedule::{self, Pace, Schedule};
use serde::Serialize;
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Debug, Clone)]
pub enum RateMode {
    /// Hold this many requests/second.
    Fixed(f64),
    /// Search for the highest stable rate.
    Dynamic(DynamicSettings),
    /// Closed loop: every lane as fast as answers come back.
    Max,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: RateMode,
    pub tick: Duration,
    /// Request timeout: bounds how long a drain waits for stragglers.
    pub timeout: Duration,
    /// The run ends after this long (None: until the task is dropped).
    pub duration: Option<Duration>,
    /// Dynamic mode: end the run at the first stable rate.
    pub stop_when_stable: bool,
    /// Fixed mode: report (and start a new report) every this many ticks;
    /// None reports once, over the whole run.
    pub report_every: Option<u32>,
}

/// One tick, as reported and plotted.
#[derive(Debug, Clone, Serialize)]
pub struct TickRecord {
    pub index: u32,
    /// Seconds since the run started, at the end of the tick.
    pub at_s: f64,
    pub seconds: f64,
    /// The rate asked for (none when closed loop).
    pub target_rate: Option<f64>,
    /// Successful answers per second.
    pub rate: f64,
    pub scheduled: u64,
    pub ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// The tick's slowest answer: says when in a run its max fell.
    pub max_us: u64,
    /// Dynamic mode: why the tick failed (none: it passed), and the kind.
    pub failed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_kind: Option<FailKind>,
}

/// A rate that held, with the latencies measured while it did.
#[derive(Debug, Clone, Serialize)]
pub struct Held {
    /// "stable at N [min .. max] requests/second" (or "held ..." in fixed mode).
    pub line: String,
    pub rate: f64,
    pub min: f64,
    pub max: f64,
    pub target_rate: Option<f64>,
    pub ticks: u32,
    pub latency: LatencyReport,
    /// Dynamic: the search's failed ticks so far, by reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<FailureCounts>,
}

/// What the run's owner is told as it goes.
pub trait Observer {
    fn tick(&mut self, _t: &TickRecord) {}
    /// A rate held (dynamic: found stable; fixed: a report period ended).
    fn held(&mut self, _h: &Held) {}
    fn note(&mut self, _msg: &str) {}
}

/// How the run ended.
pub struct RunEnd {
    pub ticks: Vec<TickRecord>,
    /// Dynamic: the stable rate (none if none was found); fixed: the whole
    /// run (or the last report period).
    pub held: Option<Held>,
    /// The latencies `held` reports on.
    pub latencies: Option<Latencies>,
    pub seconds: f64,
    /// Dynamic: the search's failed ticks by reason, and what became of them.
    pub search: Option<FailureCounts>,
    /// Dynamic: what the closed-loop probe answered, per second.
    pub probe_rate: Option<f64>,
}

/// Requests in flight per lane during the probe: enough to keep a target's
/// queue full through the core's round trip (64 per lane, 3 lanes: 192),
/// few enough to stay far under the core's queue limits.
pub const PROBE_INFLIGHT_PER_LANE: usize = 64;

/// The probe lasts one tick, at most this long: it only has to fill the
/// target's queue and count what comes back.
pub const PROBE_MAX: Duration = Duration::from_secs(2);

/// Runs the plan until its duration ends (or, dynamic with
/// `stop_when_stable`, until a rate is stable). Sets `Pace::Stopped` at the end.
pub async fn drive(
    plan: &Plan,
    pace: &watch::Sender<Schedule>,
    rec: &SharedRecorder,
    obs: &mut dyn Observer,
) -> RunEnd {
    let started = Instant::now();
    let end_at = plan.duration.map(|d| started + d);
    let mut dynamic = match &plan.mode {
        RateMode::Dynamic(s) => Some(Dynamic::new(s.clone())),
        _ => None,
    };
    let target = |d: &Option<Dynamic>| match (&plan.mode, d) {
        (RateMode::Fixed(r), _) => Some(*r),
        (RateMode::Dynamic(_), Some(d)) => Some(d.rate()),
        _ => None,
    };
    let set_pace = |rate: Option<f64>, at: Instant| match rate {
        Some(rate) => schedule::set(pace, Pace::Rate { start: at, rate }),
        None => schedule::set(pace, Pace::AsFastAsPossible),
    };

    let mut probe_rate = None;
    if let (Some(d), RateMode::Dynamic(s)) = (dynamic.as_mut(), &plan.mode) {
        if s.probe {
            let rate = probe(plan, pace, rec, end_at).await;
            d.probed(rate);
            obs.note(&format!("closed-loop probe: {rate:.1} answers/second; the search starts at {:.1}", d.rate()));
            probe_rate = Some(rate);
        }
    }

    rec.lock().take_tick();
    let mut tick_start = Instant::now();
    set_pace(target(&dynamic), tick_start);
    let mut ticks: Vec<TickRecord> = Vec::new();
    let mut hold = Window::default();
    let mut hold_ticks = 0u32;
    let mut held: Option<(Held, Latencies)> = None;

    loop {
        let mut until = tick_start + plan.tick;
        if let Some(end) = end_at {
            until = until.min(end);
        }
        tokio::time::sleep_until(until.into()).await;
        let now = Instant::now();
        let w = rec.lock().take_tick();
        let seconds = now.duration_since(tick_start).as_secs_f64();
        let rate_asked = target(&dynamic);
        let outcome = TickOutcome {
            rate: rate_asked.unwrap_or(0.0),
            seconds,
            scheduled: w.scheduled,
            ok: w.ok,
            errors: w.errors,
            timeouts: w.timeouts,
            p99_us: w.latency.percentile(99.0),
            mean_us: w.latency.moments.mean().unwrap_or(0.0) as u64,
            first_error: w.first_error.clone(),
        };
        let finished_early = end_at.is_some_and(|e| now >= e) && seconds < plan.tick.as_secs_f64() * 0.5;
        let mut record = TickRecord {
            index: ticks.len() as u32,
            at_s: now.duration_since(started).as_secs_f64(),
            seconds,
            target_rate: rate_asked,
            rate: outcome.measured_rate(),
            scheduled: w.scheduled,
            ok: w.ok,
            errors: w.errors,
            timeouts: w.timeouts,
            p50_us: w.latency.percentile(50.0),
            p99_us: outcome.p99_us,
            max_us: w.latency.percentile(100.0),
            failed: None,
            failed_kind: None,
        };
        tick_start = now;

        match dynamic.as_mut() {
            // A sliver of a tick cut short by the end of the run proves nothing.
            _ if finished_early => {}
            None => {
                hold.merge(&w);
                hold_ticks += 1;
                if plan.report_every.is_some_and(|n| hold_ticks >= n) {
                    let h = summarize(
                        &hold,
                        &ticks[ticks.len() + 1 - hold_ticks as usize..],
                        &record,
                        rate_asked,
                        hold_ticks,
                    );
                    obs.held(&h);
                    held = Some((h, std::mem::take(&mut hold).latency));
                    hold_ticks = 0;
                }
            }
            Some(d) => {
                let (step, failure) = d.on_tick(&outcome);
                record.failed_kind = failure.as_ref().map(|f| f.kind);
                record.failed = failure.map(|f| f.why);
                match step {
                    Step::Hold => {
                        hold.merge(&w);
                        hold_ticks += 1;
                    }
                    Step::Stable { rate, mean, min, max } => {
                        hold.merge(&w);
                        hold_ticks += 1;
                        let mut h = summarize(&hold, &[], &record, Some(rate), hold_ticks);
                        h.rate = mean;
                        h.min = min;
                        h.max = max;
                        h.line = stable_line(mean, min, max);
                        h.search = Some(d.counts().clone());
                        obs.held(&h);
                        held = Some((h, hold.latency.clone()));
                    }
                    Step::Change { rate, drain } => {
                        hold = Window::default();
                        hold_ticks = 0;
                        if drain {
                            let again = if rate == outcome.rate { " again" } else { "" };
                            obs.note(&format!(
                                "{:.1} requests/second failed ({}); draining, then trying{again} {:.1}",
                                outcome.rate,
                                record.failed.as_deref().unwrap_or("?"),
                                rate
                            ));
                            schedule::set(pace, Pace::Paused);
                            drain_outstanding(rec, plan.timeout + Duration::from_secs(1), end_at).await;
                            rec.lock().take_tick();
                            tick_start = Instant::now();
                        }
                        set_pace(Some(rate), tick_start);
                    }
                }
            }
        }
        if !finished_early {
            obs.tick(&record);
            ticks.push(record);
        }
        let stable_now = dynamic.as_ref().is_some_and(Dynamic::is_stable);
        if (plan.stop_when_stable && stable_now) || end_at.is_some_and(|e| Instant::now() >= e) {
            break;
        }
    }
    schedule::set(pace, Pace::Stopped);
    // Fixed rate: the report covers the ticks since the last one printed
    // (the whole run when reports are not periodic).
    if dynamic.is_none() && hold_ticks > 0 {
        if let Some(last) = ticks.last() {
            let h = summarize(
                &hold,
                &ticks[ticks.len() - hold_ticks as usize..ticks.len() - 1],
                last,
                target(&dynamic),
                hold_ticks,
            );
            held = Some((h, hold.latency));
        }
    }
    let (held, latencies) = held.map_or((None, None), |(h, l)| (Some(h), Some(l)));
    let search = dynamic.as_ref().map(|d| d.counts().clone());
    RunEnd { ticks, held, latencies, seconds: started.elapsed().as_secs_f64(), search, probe_rate }
}

/// Rate and latency of consecutive ticks at one target.
fn summarize(w: &Window, earlier: &[TickRecord], last: &TickRecord, target: Option<f64>, ticks: u32) -> Held {
    let rates: Vec<f64> = earlier.iter().map(|t| t.rate).chain(std::iter::once(last.rate)).collect();
    let seconds: f64 = earlier.iter().map(|t| t.seconds).sum::<f64>() + last.seconds;
    let rate = if seconds > 0.0 { w.ok as f64 / seconds } else { 0.0 };
    let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
    let max = rates.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let target_text = target.map(|t| format!(" (target {t:.1})")).unwrap_or_default();
    Held {
        line: format!("held {rate:.1} [{min:.1} .. {max:.1}] requests/second{target_text} over {ticks} ticks"),
        rate,
        min,
        max,
        target_rate: target,
        ticks,
        latency: w.latency.report(),
        search: None,
    }
}

/// The closed-loop probe: every lane keeps `PROBE_INFLIGHT_PER_LANE`
/// requests in flight for one tick (at most `PROBE_MAX`); what is answered
/// per second bounds the capacity from above when that many fill the
/// target's queue. Then the lanes pause and drain, and the recorder's tick
/// is reset, so the search's first tick measures its own rate.
async fn probe(plan: &Plan, pace: &watch::Sender<Schedule>, rec: &SharedRecorder, end_at: Option<Instant>) -> f64 {
    rec.lock().take_tick();
    let start = Instant::now();
    schedule::set(pace, Pace::Probe { inflight_per_lane: PROBE_INFLIGHT_PER_LANE });
    let mut until = start + plan.tick.min(PROBE_MAX);
    if let Some(e) = end_at {
        until = until.min(e);
    }
    tokio::time::sleep_until(until.into()).await;
    let w = rec.lock().take_tick();
    let seconds = start.elapsed().as_secs_f64();
    schedule::set(pace, Pace::Paused);
    drain_outstanding(rec, plan.timeout + Duration::from_secs(1), end_at).await;
    rec.lock().take_tick();
    if seconds > 0.0 {
        w.ok as f64 / seconds
    } else {
        0.0
    }
}

/// Waits until nothing is outstanding, at most `limit` (or the run's end).
async fn drain_outstanding(rec: &SharedRecorder, limit: Duration, end_at: Option<Instant>) {
    let mut until = Instant::now() + limit;
    if let Some(e) = end_at {
        until = until.min(e);
    }
    while rec.lock().outstanding > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
