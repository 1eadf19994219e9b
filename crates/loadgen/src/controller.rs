//! The dynamic rate search: find the highest request rate the target holds
//! without errors, timeouts, backlog or runaway latency, and confirm it
//! holds for `stable_ticks` ticks in a row.
//!
//! A short closed-loop probe (the driver's) may give a first estimate of the
//! capacity: the search then starts just under it, with the estimate as a
//! ceiling not yet confirmed. Without one it doubles from `start_rate`.
//! While ticks pass the rate rises (doubling, or bisecting towards the
//! ceiling); a failure brackets the answer and the search bisects until the
//! bracket is within `precision`, then holds the lower end.
//!
//! Transient stalls and real limits look alike in one tick, so no single
//! tick decides:
//! - a failed tick is followed by a drain (the lanes pause until what is
//!   outstanding has ended) and a retry at the same rate; only a second
//!   failure at that rate counts as a limit. A retry that passes was a
//!   transient failure: counted, and the search goes on as if it had passed;
//! - a ceiling found that way is not yet confirmed: when the bracket under
//!   it has closed, the search tries it once more (at most `raises` times in
//!   a run, so the search still ends). If it passes, the ceiling is lifted
//!   and the search climbs again in smaller steps; if it fails again it is
//!   confirmed and the search holds the rate under it.
//!
//! Every failed tick is counted by its reason (`FailureCounts`), so a report
//! shows whether its figure is a capacity or noise.

use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DynamicSettings {
    /// First rate tried, requests/second (when no probe gives a better one).
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
    /// Start with a closed-loop probe of the capacity (see the driver).
    pub probe: bool,
    /// Most times in a run an unconfirmed ceiling is tried again: each try
    /// costs a few ticks, and the bound makes the search end.
    pub raises: u32,
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
            probe: true,
            raises: 3,
        }
    }
}

/// Lowest rate the search goes down to.
pub const MIN_RATE: f64 = 1.0;

/// The paced search starts this far under the probe's closed-loop rate:
/// a queue kept full answers a little faster than a paced load can be held.
pub const PROBE_START: f64 = 0.9;

/// The probe's rate, this much higher, is the first (unconfirmed) ceiling.
pub const PROBE_CEILING: f64 = 1.1;

/// Growth per passing tick once a ceiling has been lifted: the capacity is
/// near, doubling would overshoot it by far.
pub const REGROWTH: f64 = 1.25;

/// Share of a tick's requests that may be missing at its end beyond those
/// still in flight: 2%, so a rate a few percent above the capacity fails
/// in one tick rather than passing on the slack (a lone hiccup is caught
/// by the retry, not by a loose threshold).
pub const BACKLOG_SHARE: f64 = 0.02;

/// Passing ticks in a row at an unconfirmed ceiling to lift it.
pub const LIFT_TICKS: usize = 2;

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
    /// Mean latency of the tick's answers, µs (0 when none).
    pub mean_us: u64,
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

/// Why a tick failed, the first that applies in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// Error answers (or a failed connection, or a failed check).
    Errors,
    /// Requests timed out (or could not be sent within their timeout).
    Timeouts,
    /// Fewer than 95% of the requests due were answered within the tick.
    Backlog,
    /// The tick's p99 latency was above the limit.
    Latency,
}

/// A failed tick: its kind, and the reason in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailKind,
    pub why: String,
}

/// The search's failed ticks, by reason, and what became of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FailureCounts {
    /// Ticks judged (the probe is not one).
    pub ticks: u32,
    pub errors: u32,
    pub timeouts: u32,
    pub backlog: u32,
    pub latency: u32,
    /// Failed ticks whose retry at the same rate passed: stalls, not limits.
    pub transient: u32,
    /// Ceilings tried again after the bracket under them closed.
    pub ceiling_retries: u32,
    /// Of those, ceilings that passed and were lifted.
    pub ceilings_lifted: u32,
}

impl FailureCounts {
    pub fn failed(&self) -> u32 {
        self.errors + self.timeouts + self.backlog + self.latency
    }

    fn add(&mut self, kind: FailKind) {
        match kind {
            FailKind::Errors => self.errors += 1,
            FailKind::Timeouts => self.timeouts += 1,
            FailKind::Backlog => self.backlog += 1,
            FailKind::Latency => self.latency += 1,
        }
    }

    /// "search: 9 ticks, 3 failed (1 errors, 0 timeouts, 2 backlog, 0 latency); 1 transient (passed on retry); 0 ceiling retries, 0 lifted"
    pub fn line(&self) -> String {
        format!(
            "search: {} ticks, {} failed ({} errors, {} timeouts, {} backlog, {} latency); {} transient (passed on retry); {} ceiling retries, {} lifted",
            self.ticks,
            self.failed(),
            self.errors,
            self.timeouts,
            self.backlog,
            self.latency,
            self.transient,
            self.ceiling_retries,
            self.ceilings_lifted
        )
    }
}

/// The search's decision after a tick.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Keep the rate (a hold in progress, or the rate is already stable).
    Hold,
    /// Go to a new rate (or retry this one); `drain` first when the last
    /// tick failed.
    Change { rate: f64, drain: bool },
    /// The rate held for `stable_ticks` ticks: measured rates over them.
    Stable { rate: f64, mean: f64, min: f64, max: f64 },
}

/// The lowest rate known to fail (or guessed to, from the probe).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Ceiling {
    rate: f64,
    /// Failed when tried again (or after it was already tried again).
    confirmed: bool,
}

pub struct Dynamic {
    s: DynamicSettings,
    rate: f64,
    /// Highest rate that passed.
    lo: Option<f64>,
    hi: Option<Ceiling>,
    /// Measured rates of the passing ticks in a row at this rate.
    held: Vec<f64>,
    /// Lowest p99 of a passing tick: the latency reference.
    p99_reference: Option<u64>,
    stable: bool,
    /// The current rate failed once already (and is being retried, or was
    /// retried and passed): the next failure at it counts.
    retried: bool,
    /// The last tick failed and this one is its retry.
    retrying: bool,
    /// A ceiling was lifted: climb in small steps, not by doubling.
    lifted: bool,
    raises_left: u32,
    counts: FailureCounts,
}

impl Dynamic {
    pub fn new(s: DynamicSettings) -> Dynamic {
        let rate = clamp(s.start_rate.max(MIN_RATE), s.max_rate);
        let raises_left = s.raises;
        Dynamic {
            s,
            rate,
            lo: None,
            hi: None,
            held: Vec::new(),
            p99_reference: None,
            stable: false,
            retried: false,
            retrying: false,
            lifted: false,
            raises_left,
            counts: FailureCounts::default(),
        }
    }

    /// The closed-loop probe answered `rate` per second: start just under
    /// it, with an unconfirmed ceiling just above it. A probe that answered
    /// less than the start rate (errors, too few in flight) is ignored.
    pub fn probed(&mut self, rate: f64) {
        if !(rate.is_finite() && rate * PROBE_START > self.rate) || self.lo.is_some() {
            return;
        }
        self.rate = clamp(rate * PROBE_START, self.s.max_rate);
        self.hi = Some(Ceiling { rate: rate * PROBE_CEILING, confirmed: false });
        // Climbing past the probe is climbing past a lifted ceiling.
        self.lifted = true;
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn is_stable(&self) -> bool {
        self.stable
    }

    pub fn counts(&self) -> &FailureCounts {
        &self.counts
    }

    pub fn latency_limit_us(&self) -> Option<u64> {
        if let Some(l) = self.s.latency_limit {
            return Some(l.as_micros() as u64);
        }
        let floor = self.s.latency_floor.as_micros() as u64;
        self.p99_reference.map(|r| (r * 10).max(floor))
    }

    /// Why a tick failed, or None if it passed.
    pub fn judge(&self, t: &TickOutcome) -> Option<Failure> {
        if t.timeouts > 0 || t.errors > 0 {
            let first = t.first_error.as_deref().map(|e| format!(" (first: {e})")).unwrap_or_default();
            let kind = if t.errors > 0 { FailKind::Errors } else { FailKind::Timeouts };
            return Some(Failure { kind, why: format!("{} errors, {} timeouts{first}", t.errors, t.timeouts) });
        }
        // A backlog growing in the target (or a sender that cannot keep up)
        // shows as answers falling behind the schedule. Some are still on
        // their way at the end of any tick: rate x mean latency of the
        // tick (Little's law), which a tick starting after a drain has
        // to fill. A growing backlog falls behind twice as fast as its
        // rising latency explains, so it still fails.
        let due = (t.rate * t.seconds).max(t.scheduled as f64);
        let in_flight = t.rate * t.mean_us as f64 / 1e6;
        if (t.ok as f64) < due - BACKLOG_SHARE * due - in_flight {
            let why = format!("only {} of {:.0} requests answered within the tick", t.ok, due);
            return Some(Failure { kind: FailKind::Backlog, why });
        }
        if let Some(limit) = self.latency_limit_us() {
            if t.p99_us > limit {
                let why = format!("p99 latency {} us above the limit of {} us", t.p99_us, limit);
                return Some(Failure { kind: FailKind::Latency, why });
            }
        }
        None
    }

    pub fn on_tick(&mut self, t: &TickOutcome) -> (Step, Option<Failure>) {
        let failure = self.judge(t);
        self.counts.ticks += 1;
        let step = match &failure {
            None => {
                if std::mem::take(&mut self.retrying) {
                    self.counts.transient += 1;
                }
                self.passed(t)
            }
            Some(f) => {
                self.counts.add(f.kind);
                self.retrying = false;
                if self.retried {
                    let answered = (f.kind == FailKind::Backlog).then(|| t.measured_rate());
                    self.failed(answered)
                } else {
                    // One failure proves nothing yet: drain, and the same rate again.
                    self.retried = true;
                    self.retrying = true;
                    self.held.clear();
                    Step::Change { rate: self.rate, drain: true }
                }
            }
        };
        (step, failure)
    }

    fn passed(&mut self, t: &TickOutcome) -> Step {
        // The lowest so far, not just the first: a first tick slowed by
        // warm-up (or a busy machine) would otherwise allow anything.
        self.p99_reference = Some(self.p99_reference.map_or(t.p99_us, |r| r.min(t.p99_us)).max(1));
        self.held.push(t.measured_rate());
        // Passing at (or above) the ceiling, twice in a row: it was a stall,
        // not a limit. (Once is not enough: a rate a little above the
        // capacity can pass one tick fresh after a drain.)
        let at_hi = self.hi.is_some_and(|h| self.rate >= h.rate * (1.0 - 1e-9));
        if at_hi && self.held.len() < LIFT_TICKS && !self.stable {
            return Step::Hold;
        }
        self.lo = Some(self.lo.map_or(self.rate, |lo| lo.max(self.rate)));
        if at_hi {
            self.hi = None;
            self.lifted = true;
            self.counts.ceilings_lifted += 1;
        }
        if self.stable {
            return Step::Hold;
        }
        let at_ceiling = self.s.max_rate.is_some_and(|m| self.rate >= m);
        let next = match self.hi {
            _ if at_ceiling => None,
            None if self.lifted => Some(self.rate * REGROWTH),
            None => Some(self.rate * 2.0),
            Some(hi) if (hi.rate - self.rate) / self.rate > self.s.precision => Some(0.5 * (self.rate + hi.rate)),
            // The bracket is closed under a ceiling not yet confirmed: try it again.
            Some(hi) if !hi.confirmed && self.raises_left > 0 => {
                self.raises_left -= 1;
                self.counts.ceiling_retries += 1;
                Some(hi.rate)
            }
            Some(_) => None,
        };
        if let Some(next) = next {
            return self.change(clamp(next, self.s.max_rate), false);
        }
        if self.held.len() >= self.s.stable_ticks as usize {
            self.stable = true;
            // A later failure while holding gets its own retry.
            self.retried = false;
            let mean = self.held.iter().sum::<f64>() / self.held.len() as f64;
            let min = self.held.iter().copied().fold(f64::INFINITY, f64::min);
            let max = self.held.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            return Step::Stable { rate: self.rate, mean, min, max };
        }
        Step::Hold
    }

    /// The current rate failed twice in a row: a limit, at least for now.
    /// `answered`: what the target answered per second in the last tick,
    /// when it fell behind.
    fn failed(&mut self, answered: Option<f64>) -> Step {
        self.stable = false;
        let rate = self.rate;
        // Answering far less than asked, and less than a rate that passed
        // before: the target slowed down. What it answered is where its
        // capacity is now, as a probe's rate is: start under it.
        if let Some(a) = answered.filter(|&a| a < rate * PROBE_START && self.lo.is_some_and(|lo| a < lo)) {
            self.lo = None;
            self.hi = Some(Ceiling { rate: (a * PROBE_CEILING).min(rate), confirmed: false });
            return self.change((a * PROBE_START).max(MIN_RATE), true);
        }
        // Passed before at this rate (or above), and now failed twice: a
        // rate at the edge, which trying again will not settle.
        let at_the_edge = self.lo.is_some_and(|lo| lo >= rate);
        self.hi = Some(match self.hi {
            // Failing again at the ceiling: confirmed.
            Some(h) if rate >= h.rate * (1.0 - 1e-9) => Ceiling { rate: h.rate, confirmed: true },
            _ => Ceiling { rate, confirmed: at_the_edge },
        });
        let next = match self.lo {
            // Hold just under it (what passed above it no longer counts).
            Some(_) if at_the_edge => {
                self.lo = None;
                rate / (1.0 + 0.9 * self.s.precision)
            }
            Some(lo) if (rate - lo) / lo > self.s.precision => 0.5 * (lo + rate),
            Some(lo) => lo,
            None => rate * 0.5,
        };
        self.change(next.max(MIN_RATE), true)
    }

    fn change(&mut self, rate: f64, drain: bool) -> Step {
        self.held.clear();
        self.retried = false;
        self.retrying = false;
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
            mean_us: 500,
            first_error: None,
        }
    }

    /// A tick of a stall: nothing answered, everything timed out.
    fn stalled(rate: f64) -> TickOutcome {
        TickOutcome { ok: 0, timeouts: rate as u64, first_error: None, ..tick(rate, 1e9) }
    }

    /// Runs the search against `capacity(tick index)` until stable; returns
    /// the stable rate and the ticks it took.
    fn search(d: &mut Dynamic, capacity: impl Fn(usize) -> f64) -> (f64, usize) {
        for i in 0..200 {
            if let (Step::Stable { rate, .. }, _) = d.on_tick(&tick(d.rate(), capacity(i))) {
                return (rate, i + 1);
            }
        }
        panic!("no stable rate after 200 ticks (at {}, {:?})", d.rate(), d.counts());
    }

    fn quick() -> DynamicSettings {
        DynamicSettings { stable_ticks: 3, ..Default::default() }
    }

    #[test]
    fn finds_a_rate_just_under_the_capacity_and_holds_it() {
        let capacity = 3170.0;
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 5, ..Default::default() });
        let (stable, _) = search(&mut d, |_| capacity);
        assert!(stable <= capacity && stable > capacity * 0.95, "stable at {stable}");
        assert!(d.is_stable());
        assert_eq!(d.on_tick(&tick(d.rate(), capacity)).0, Step::Hold);
        // The ceiling was found, tried again, and confirmed.
        let c = d.counts();
        assert_eq!((c.ceiling_retries, c.ceilings_lifted, c.transient), (1, 0, 0), "{c:?}");
        assert!(c.failed() >= 4, "{c:?}");
    }

    #[test]
    fn one_failed_tick_is_drained_and_retried_and_counts_as_transient() {
        let mut d = Dynamic::new(DynamicSettings { start_rate: 1000.0, ..quick() });
        d.on_tick(&tick(1000.0, 1e9));
        assert_eq!(d.rate(), 2000.0);
        let (step, failure) = d.on_tick(&stalled(2000.0));
        assert_eq!(step, Step::Change { rate: 2000.0, drain: true });
        assert_eq!(failure.unwrap().kind, FailKind::Timeouts);
        // the retry passes: the search goes on upwards as if nothing happened
        assert_eq!(d.on_tick(&tick(2000.0, 1e9)).0, Step::Change { rate: 4000.0, drain: false });
        let c = d.counts();
        assert_eq!((c.timeouts, c.transient, c.failed()), (1, 1, 1));
        // errors are retried too: a hiccup can fail requests as well as slow them
        let mut failing = tick(4000.0, 1e9);
        failing.errors = 3;
        assert_eq!(d.on_tick(&failing).0, Step::Change { rate: 4000.0, drain: true });
        // two in a row at one rate: a limit
        assert!(matches!(d.on_tick(&failing).0, Step::Change { rate, drain: true } if rate == 3000.0));
        assert_eq!(d.counts().errors, 2);
    }

    #[test]
    fn an_early_stall_does_not_cap_the_search() {
        // The stall fails a tick and its retry (a long stall, or two in a
        // row): that much once capped a whole run. The ceiling it left is
        // tried again when the bracket under it closes, passes, and the
        // search climbs back to the capacity.
        let capacity = 3000.0;
        let mut d = Dynamic::new(DynamicSettings { start_rate: 1000.0, ..quick() });
        d.on_tick(&tick(1000.0, capacity));
        assert_eq!(d.rate(), 2000.0);
        assert_eq!(d.on_tick(&stalled(2000.0)).0, Step::Change { rate: 2000.0, drain: true });
        assert_eq!(d.on_tick(&stalled(2000.0)).0, Step::Change { rate: 1500.0, drain: true });
        let (stable, ticks) = search(&mut d, |_| capacity);
        assert!(stable <= capacity && stable > capacity * 0.9, "stable at {stable}");
        assert!(ticks < 40, "{ticks} ticks");
        assert!(d.counts().ceilings_lifted >= 1, "{:?}", d.counts());
    }

    #[test]
    fn a_ceiling_is_lifted_only_after_two_passing_ticks_at_it() {
        // the probe's ceiling (2200) is tried when the bracket under it closes
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 3, raises: 1, ..Default::default() });
        d.probed(2000.0);
        while d.rate() < 2200.0 - 1e-6 {
            assert!(!matches!(d.on_tick(&tick(d.rate(), 1e9)).0, Step::Stable { .. }));
        }
        // one pass at the ceiling holds it, a second lifts it and climbs on
        assert_eq!(d.on_tick(&tick(2200.0, 1e9)).0, Step::Hold);
        assert_eq!(d.counts().ceilings_lifted, 0);
        assert!(
            matches!(d.on_tick(&tick(2200.0, 1e9)).0, Step::Change { rate, drain: false } if rate == 2200.0 * REGROWTH)
        );
        assert_eq!(d.counts().ceilings_lifted, 1);
        // a ceiling that passes once and then fails twice is confirmed
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 3, raises: 1, ..Default::default() });
        d.probed(2000.0);
        while d.rate() < 2200.0 - 1e-6 {
            d.on_tick(&tick(d.rate(), 1e9));
        }
        d.on_tick(&tick(2200.0, 1e9));
        d.on_tick(&stalled(2200.0));
        assert!(matches!(d.on_tick(&stalled(2200.0)).0, Step::Change { rate, drain: true } if rate < 2200.0));
        let (stable, _) = search(&mut d, |_| 1e9);
        assert!(stable < 2200.0 && stable > 2000.0, "{stable}");
        assert_eq!(d.counts().ceilings_lifted, 0);
    }

    #[test]
    fn the_probe_starts_the_search_near_the_answer() {
        let capacity = 20_000.0;
        let mut d = Dynamic::new(quick());
        d.probed(capacity);
        assert_eq!(d.rate(), capacity * PROBE_START);
        let (stable, ticks) = search(&mut d, |_| capacity);
        assert!(stable <= capacity && stable > capacity * 0.9, "stable at {stable}");
        let mut from_bottom = Dynamic::new(quick());
        let (_, ticks_from_bottom) = search(&mut from_bottom, |_| capacity);
        assert!(ticks < ticks_from_bottom, "{ticks} ticks with the probe, {ticks_from_bottom} without");
    }

    #[test]
    fn a_probe_that_underestimates_does_not_cap_the_search() {
        // too few requests in flight to fill the target: the probe answers
        // a quarter of the capacity
        let capacity = 8000.0;
        let mut d = Dynamic::new(quick());
        d.probed(capacity / 4.0);
        let (stable, _) = search(&mut d, |_| capacity);
        assert!(stable <= capacity && stable > capacity * 0.9, "stable at {stable}");
        // and one that answered nothing is ignored
        let mut d = Dynamic::new(quick());
        d.probed(0.0);
        assert_eq!(d.rate(), 100.0);
    }

    #[test]
    fn a_capacity_that_halves_during_the_search_is_followed_down() {
        let mut d = Dynamic::new(quick());
        d.probed(2000.0);
        let (stable, _) = search(&mut d, |i| if i < 4 { 2000.0 } else { 1000.0 });
        assert!(stable <= 1000.0 && stable > 900.0, "stable at {stable}");
    }

    #[test]
    fn a_failure_while_holding_backs_off_and_searches_again() {
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 2, start_rate: 1000.0, ..Default::default() });
        search(&mut d, |_| 1500.0);
        let held = d.rate();
        // the target slows down to half: retried once, then the search moves
        assert_eq!(d.on_tick(&tick(held, 700.0)).0, Step::Change { rate: held, drain: true });
        let (step, why) = d.on_tick(&tick(held, 700.0));
        assert!(why.is_some());
        assert!(matches!(step, Step::Change { drain: true, rate } if rate < held));
        let (stable, _) = search(&mut d, |_| 700.0);
        assert!(stable <= 700.0 && stable > 630.0, "{stable}");
    }

    #[test]
    fn a_flaky_target_cannot_keep_the_search_going_up_forever() {
        // Every other tick fails, and so does any rate above 4000:
        // ceilings are tried again at most `raises` times, and the rate
        // stays within reach of the capacity.
        let mut d = Dynamic::new(DynamicSettings { start_rate: 1000.0, raises: 2, ..quick() });
        for i in 0..500 {
            let t = if i % 2 == 0 { tick(d.rate(), 4000.0) } else { stalled(d.rate()) };
            d.on_tick(&t);
            assert!(d.rate() >= MIN_RATE && d.rate() <= 8000.0, "{}", d.rate());
        }
        assert!(d.counts().ceiling_retries <= 2, "{:?}", d.counts());
    }

    #[test]
    fn failures_are_judged_and_named_by_kind() {
        let d = Dynamic::new(DynamicSettings { latency_limit: Some(Duration::from_millis(2)), ..Default::default() });
        let mut t = tick(100.0, 1000.0);
        assert_eq!(d.judge(&t), None);
        t.errors = 1;
        t.first_error = Some("NO_SERVICE".into());
        let f = d.judge(&t).unwrap();
        assert!(f.why.contains("NO_SERVICE") && f.kind == FailKind::Errors);
        let mut t = tick(100.0, 1000.0);
        t.timeouts = 2;
        assert_eq!(d.judge(&t).unwrap().kind, FailKind::Timeouts);
        let mut t = tick(100.0, 1000.0);
        t.p99_us = 2_001;
        let f = d.judge(&t).unwrap();
        assert!(f.why.contains("p99") && f.kind == FailKind::Latency);
        let mut t = tick(100.0, 1000.0);
        t.ok = 80;
        let f = d.judge(&t).unwrap();
        assert!(f.why.contains("80 of 100") && f.kind == FailKind::Backlog);
        let c = FailureCounts { ticks: 9, errors: 1, backlog: 2, transient: 1, ..Default::default() };
        assert_eq!(
            c.line(),
            "search: 9 ticks, 3 failed (1 errors, 0 timeouts, 2 backlog, 0 latency); 1 transient (passed on retry); 0 ceiling retries, 0 lifted"
        );
    }

    #[test]
    fn never_goes_above_max_or_below_min() {
        let mut d = Dynamic::new(DynamicSettings { stable_ticks: 1, max_rate: Some(300.0), ..Default::default() });
        d.probed(1e6);
        assert_eq!(d.rate(), 300.0);
        for _ in 0..10 {
            d.on_tick(&tick(d.rate(), 1e9));
            assert!(d.rate() <= 300.0);
        }
        let mut d = Dynamic::new(DynamicSettings::default());
        for _ in 0..40 {
            d.on_tick(&tick(d.rate(), 0.0));
            assert!(d.rate() >= MIN_RATE);
        }
    }
}
