//! The resiliency policies on the hot path (docs/CONFIG.md, "Resiliency";
//! the rules themselves are in `cumulo_resilience`).
//!
//! With no `[[policy]]` the core holds no `Resilience` and every path pays
//! one `is_none` branch. With policies, each request routed is looked up
//! (one hash lookup per name, remembered) and, under a policy that follows
//! outcomes, its in-flight entry carries a `Track`: the (policy, pattern)
//! target whose breaker admitted it, its attempt number, whether it is a
//! half-open probe. Its outcome, wherever it comes from (an answer, a
//! timeout, a crash, a refusal before delivery), passes through
//! `Core::settle`, which counts it for the breaker and the instance and
//! decides whether it is tried again.
//!
//! A retry is the request routed again after its backoff, avoiding the
//! instance that failed when another can take it, within what is left of
//! the request's own deadline: never after it. Retrying a status that can
//! come after delivery (TIMEOUT, CRASHED, SERVICE_ERROR) needs the request
//! kept while it is out: a copy, bounded in bytes (`MAX_COPY_BYTES`).
//!
//! Only the shard (and node) a request entered applies its retries,
//! breaker and timeout: another shard or node that serves it only counts
//! its own instances' outcomes for outlier ejection, so attempts do not
//! multiply across hops.

use crate::instance::OwnedRequest;
use crate::registry::InstanceId;
use crate::routing::Route;
use crate::state::Core;
use ahash::AHashMap;
use cumulo_config::policy::PolicyConfig;
use cumulo_proto::{Status, TransId};
use cumulo_resilience::{Admission, Breaker, BreakerState, Outlier, Policies, Policy};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Bytes of requests kept for retries, at most: copies of requests out
/// at an instance, and requests waiting out a backoff. Past it a request
/// goes without a copy, or is answered instead of waiting for a retry
/// (counted as `uncopied`).
pub const MAX_COPY_BYTES: usize = 64 * 1024 * 1024;
/// Requests from another shard or node that failed at an instance here,
/// remembered so that their retry (the same trans_id, sent again) goes to
/// another instance here; at most this many, the table starts over past it.
pub const MAX_REMEMBERED_FAILURES: usize = 16_384;
/// (policy, pattern) targets with a breaker or counters, at most; past it
/// closed, idle ones are forgotten first.
pub const MAX_TARGETS: usize = 4096;

const NONE: u32 = u32::MAX;

/// What an in-flight request carries under a policy that follows outcomes.
#[derive(Debug, Clone, Copy)]
pub struct Track {
    target: u32,
    /// Policies replaced since: a track of an older generation is ignored.
    generation: u8,
    /// Retries made before this attempt.
    attempt: u8,
    probe: bool,
    /// From another shard or node: only its outcome for the instance
    /// counts here (`outlier`); the shard it entered retries.
    outlier_only: bool,
}

impl Default for Track {
    fn default() -> Self {
        Track { target: NONE, generation: 0, attempt: 0, probe: false, outlier_only: false }
    }
}

impl Track {
    #[inline]
    pub fn is_tracked(&self) -> bool {
        self.target != NONE
    }
}

/// A (policy, pattern) pair: the breaker and counters of one destination
/// under one policy.
#[derive(Debug)]
struct Target {
    policy: Rc<Policy>,
    pattern: Rc<str>,
    breaker: Option<Breaker>,
    counts: TargetCounts,
}

/// What one target counted.
#[derive(Debug, Clone, Copy, Default)]
pub struct TargetCounts {
    pub attempts: u64,
    pub retries: u64,
    pub failures: u64,
}

/// A request waiting out its backoff before its next attempt.
#[derive(Debug)]
struct Waiting {
    at: Instant,
    request: OwnedRequest,
    /// The instance the last attempt failed at: not picked again if
    /// another can take it.
    avoid: InstanceId,
    attempt: u8,
    /// The request's timeout, as its in-flight entry had it.
    timeout_ms: u32,
    /// What it weighs against `MAX_COPY_BYTES`.
    bytes: usize,
}

/// A request kept while it is out, for a retry after delivery.
#[derive(Debug)]
struct Copy {
    request: OwnedRequest,
    bytes: usize,
}

/// Core-wide counters of the policies (this shard's).
#[derive(Debug, Clone, Copy, Default)]
pub struct ResilienceStats {
    pub retries: u64,
    /// Requests answered OK after at least one retry.
    pub recovered: u64,
    /// Requests whose last attempt failed with retries left unused: the
    /// deadline left no room, or the status is not retried.
    pub gave_up: u64,
    /// Requests refused at once by an open breaker.
    pub refused: u64,
    pub trips: u64,
    pub ejections: u64,
    /// Requests that went without a copy (MAX_COPY_BYTES reached).
    pub uncopied: u64,
}

pub struct Resilience {
    policies: Policies,
    generation: u8,
    targets: Vec<Target>,
    by_key: AHashMap<(u32, Rc<str>), u32>,
    /// Instances with a run of failures or an ejection behind them.
    outliers: AHashMap<InstanceId, Outlier>,
    /// Instances out of selection, until when.
    ejected: AHashMap<InstanceId, Instant>,
    waiting: AHashMap<TransId, Waiting>,
    copies: AHashMap<TransId, Copy>,
    copy_bytes: usize,
    /// Requests another shard or node sent here that failed at an
    /// instance here: the shard they entered retries them, and their next
    /// attempt here avoids that instance (`Core::select`).
    failed_here: AHashMap<TransId, InstanceId>,
    /// The policy `send` just resolved for a new request (its trans_id and
    /// the policy's index), so that `plan` does not look the name up again.
    resolved: Option<(TransId, Option<u32>)>,
    /// The target last found, by the address of its pattern's string (the
    /// target holds that string, so the address names it while it lives):
    /// a run of requests to one destination skips the hash lookup.
    last_target: Option<(u32, *const u8, u32)>,
    stats: ResilienceStats,
    rng: fastrand::Rng,
}

impl Resilience {
    fn new(configs: &[PolicyConfig]) -> Resilience {
        Resilience {
            policies: Policies::new(configs),
            generation: 0,
            targets: Vec::new(),
            by_key: AHashMap::new(),
            outliers: AHashMap::new(),
            ejected: AHashMap::new(),
            waiting: AHashMap::new(),
            copies: AHashMap::new(),
            copy_bytes: 0,
            failed_here: AHashMap::new(),
            resolved: None,
            last_target: None,
            stats: ResilienceStats::default(),
            rng: fastrand::Rng::new(),
        }
    }

    /// Instances out of selection at `now` (None: none at all).
    #[inline]
    pub(crate) fn ejected(&self) -> Option<&AHashMap<InstanceId, Instant>> {
        Some(&self.ejected).filter(|e| !e.is_empty())
    }

    #[inline]
    fn target(&mut self, policy: &Rc<Policy>, pattern: &Rc<str>, now: Instant) -> u32 {
        let address = pattern.as_ptr();
        if let Some((p, a, t)) = self.last_target {
            if p == policy.index && a == address {
                return t;
            }
        }
        let found = match self.by_key.get(&(policy.index, pattern.clone())) {
            Some(t) => *t,
            None => self.new_target(policy, pattern, now),
        };
        self.last_target = Some((policy.index, self.targets[found as usize].pattern.as_ptr(), found));
        found
    }

    #[cold]
    fn new_target(&mut self, policy: &Rc<Policy>, pattern: &Rc<str>, now: Instant) -> u32 {
        if self.targets.len() >= MAX_TARGETS {
            self.forget_idle_targets(now);
        }
        let index = self.targets.len() as u32;
        self.targets.push(Target {
            policy: policy.clone(),
            pattern: pattern.clone(),
            breaker: policy.breaker.as_ref().map(|_| Breaker::new(now)),
            counts: TargetCounts::default(),
        });
        self.by_key.insert((policy.index, pattern.clone()), index);
        index
    }

    /// Drops every target whose breaker is closed (or that has none),
    /// under a new generation so that tracks naming them are ignored.
    #[cold]
    fn forget_idle_targets(&mut self, now: Instant) {
        self.targets.retain(|t| t.breaker.as_ref().is_some_and(|b| b.state(now) != BreakerState::Closed));
        self.reindex();
    }

    fn reindex(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.last_target = None;
        self.by_key =
            self.targets.iter().enumerate().map(|(i, t)| ((t.policy.index, t.pattern.clone()), i as u32)).collect();
    }

    fn keep_copy(&mut self, r: &Route<'_>) -> bool {
        let bytes = crate::held::weight(r.name, r.request_info, r.request);
        if self.copy_bytes + bytes > MAX_COPY_BYTES {
            self.stats.uncopied += 1;
            return false;
        }
        self.drop_copy(&r.trans_id);
        self.copy_bytes += bytes;
        self.copies.insert(r.trans_id, Copy { request: r.to_owned(None), bytes });
        true
    }

    fn drop_copy(&mut self, tid: &TransId) -> Option<OwnedRequest> {
        let c = self.copies.remove(tid)?;
        self.copy_bytes -= c.bytes;
        Some(c.request)
    }

    /// Forgets what is kept for a request that ended.
    #[inline]
    pub(crate) fn forget(&mut self, tid: &TransId) {
        if !self.copies.is_empty() {
            self.drop_copy(tid);
        }
        if !self.waiting.is_empty() {
            if let Some(w) = self.waiting.remove(tid) {
                self.copy_bytes -= w.bytes;
            }
        }
    }

    /// The instance here a retry of `tid` failed at last, taken out (the
    /// retry avoids it while another can take it).
    #[inline]
    pub(crate) fn failed_here(&mut self, tid: &TransId) -> Option<InstanceId> {
        if self.failed_here.is_empty() {
            return None;
        }
        self.failed_here.remove(tid)
    }

    /// Whether a timer entry at `at` for `tid` is a retry still to fire.
    pub(crate) fn retry_due(&self, tid: &TransId, at: Instant) -> bool {
        self.waiting.get(tid).is_some_and(|w| w.at == at)
    }
}

/// What the admin API shows of one breaker.
#[derive(Debug, Clone)]
pub struct BreakerReport {
    pub policy: String,
    pub pattern: String,
    pub state: BreakerState,
    pub consecutive_failures: u32,
    /// How long until an open breaker lets probes through, ms.
    pub opens_in_ms: u64,
    pub trips: u64,
    pub refused: u64,
    pub counts: TargetCounts,
}

/// What the admin API shows of one instance out of selection.
#[derive(Debug, Clone)]
pub struct EjectedReport {
    pub instance: InstanceId,
    pub label: String,
    /// Ms until it is back in selection.
    pub back_in_ms: u64,
    /// Ejections since its last success.
    pub ejections: u32,
    /// "outlier" (its run of failures), or "health" (its failed health
    /// probes: out until one succeeds, `back_in_ms` 0).
    pub why: &'static str,
}

/// One shard's view of its policies: counters, breakers, ejections.
#[derive(Debug, Clone, Default)]
pub struct ResilienceReport {
    pub stats: ResilienceStats,
    pub breakers: Vec<BreakerReport>,
    pub ejected: Vec<EjectedReport>,
    /// Requests waiting out a backoff now.
    pub waiting: u64,
    pub copy_bytes: u64,
}

/// What the policy says about a request that is about to go out.
pub(crate) enum Plan {
    /// No policy follows it.
    Plain,
    /// Go, tracked; with a shorter deadline for this attempt, if any.
    Go(Track, Option<Instant>),
    /// Refused by an open breaker, with the message.
    Refused(String),
}

impl Core {
    /// Replaces the policies (the config's `[[policy]]`, or the admin
    /// API's). Breakers and counters start over; requests waiting for a
    /// retry still get it; outcomes of requests sent under the old ones
    /// count for nothing.
    pub fn set_policies(&mut self, configs: &[PolicyConfig]) {
        match &mut self.resilience {
            Some(r) => {
                r.policies = Policies::new(configs);
                r.targets.clear();
                r.reindex();
                r.outliers.clear();
                r.ejected.clear();
                if configs.is_empty() && r.waiting.is_empty() && r.copies.is_empty() {
                    self.resilience = None;
                }
            }
            None if configs.is_empty() => {}
            None => self.resilience = Some(Box::new(Resilience::new(configs))),
        }
    }

    /// Whether any policy is in force (without copying them).
    pub fn has_policies(&self) -> bool {
        self.resilience.as_ref().is_some_and(|r| !r.policies.is_empty())
    }

    /// The policies in force, as configured.
    pub fn policies(&self) -> Vec<PolicyConfig> {
        self.resilience.as_ref().map(|r| r.policies.configs()).unwrap_or_default()
    }

    /// Closes breakers by hand: those of `policy` (every one if None) on
    /// `pattern` (every one if None). Returns how many were open or
    /// half-open.
    pub fn reset_breakers(&mut self, policy: Option<&str>, pattern: Option<&str>) -> usize {
        let now = self.refresh_now();
        let Some(r) = &mut self.resilience else { return 0 };
        let mut n = 0;
        for t in &mut r.targets {
            if policy.is_some_and(|p| p != t.policy.name) || pattern.is_some_and(|p| p != &*t.pattern) {
                continue;
            }
            if let Some(b) = &mut t.breaker {
                n += (b.state(now) != BreakerState::Closed) as usize;
                b.reset();
            }
        }
        n
    }

    /// The report of the policies and the health probes of this shard;
    /// None when it has neither.
    pub fn resilience_report(&self) -> Option<ResilienceReport> {
        let unhealthy = self.health_report().map(|h| h.unhealthy).unwrap_or_default();
        let probed = unhealthy.into_iter().map(|(instance, label)| EjectedReport {
            instance,
            label,
            back_in_ms: 0,
            ejections: 0,
            why: "health",
        });
        let Some(r) = self.resilience.as_ref() else {
            let ejected: Vec<EjectedReport> = probed.collect();
            return (self.health.is_some()).then(|| ResilienceReport { ejected, ..Default::default() });
        };
        let now = self.now;
        let breakers = r
            .targets
            .iter()
            .filter_map(|t| {
                let b = t.breaker.as_ref()?;
                Some(BreakerReport {
                    policy: t.policy.name.clone(),
                    pattern: t.pattern.to_string(),
                    state: b.state(now),
                    consecutive_failures: b.consecutive_failures(),
                    opens_in_ms: b.opens_in(now).as_millis() as u64,
                    trips: b.trips(),
                    refused: b.refused(),
                    counts: t.counts,
                })
            })
            .collect();
        let ejected = r
            .ejected
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|(id, until)| EjectedReport {
                instance: *id,
                label: self.instances.get(id).map_or_else(String::new, |i| i.label.clone()),
                back_in_ms: until.saturating_duration_since(now).as_millis() as u64,
                ejections: r.outliers.get(id).map_or(0, Outlier::ejections),
                why: "outlier",
            })
            .chain(probed)
            .collect();
        Some(ResilienceReport {
            stats: r.stats,
            breakers,
            ejected,
            waiting: r.waiting.len() as u64,
            copy_bytes: r.copy_bytes as u64,
        })
    }

    /// The timeout of a new request to `name` under its policy: the
    /// caller's, or the policy's when that is shorter.
    #[inline]
    pub(crate) fn policy_timeout(&mut self, tid: TransId, name: &str, timeout_ms: u32) -> u32 {
        let Some(r) = &mut self.resilience else { return timeout_ms };
        let policy = r.policies.for_name(name);
        let (index, timeout) = (policy.map(|p| p.index), policy.and_then(|p| p.timeout));
        r.resolved = Some((tid, index));
        match timeout {
            Some(t) => timeout_ms.min(t.as_millis() as u32),
            None => timeout_ms,
        }
    }

    fn sent_by_pseudo(&self, sender: InstanceId) -> bool {
        self.instances.get(&sender).is_some_and(|i| i.endpoint.is_pseudo())
    }

    /// What the policy of `r`'s name says before it goes to `dest` (chosen
    /// by `pattern`).
    pub(crate) fn plan(&mut self, r: &Route<'_>, dest: InstanceId, pattern: &Rc<str>, sender_pseudo: bool) -> Plan {
        let now = self.now;
        let outlier_only = sender_pseudo;
        let instances = &self.instances;
        let Some(res) = self.resilience.as_deref_mut() else { return Plan::Plain };
        let policy = match res.resolved.take() {
            Some((tid, index)) if tid == r.trans_id => index.and_then(|i| res.policies.get(i)),
            _ => res.policies.for_name(r.name),
        };
        let Some(policy) = policy.filter(|p| p.tracks_outcomes()).cloned() else {
            if !res.copies.is_empty() {
                res.drop_copy(&r.trans_id);
            }
            return Plan::Plain;
        };
        if outlier_only && policy.outlier.is_none() && policy.retry.is_none() {
            return Plan::Plain;
        }
        let target = res.target(&policy, pattern, now);
        let mut track = Track { target, generation: res.generation, attempt: r.attempt, probe: false, outlier_only };
        if outlier_only {
            return Plan::Go(track, None);
        }
        let t = &mut res.targets[target as usize];
        if let (Some(s), Some(b)) = (&policy.breaker, &mut t.breaker) {
            match b.admit(s, now) {
                Admission::Pass => {}
                Admission::Probe => track.probe = true,
                Admission::Refused(wait) => {
                    res.stats.refused += 1;
                    return Plan::Refused(refused(&policy, pattern, wait));
                }
            }
        }
        t.counts.attempts += 1;
        let mut shorter = None;
        if let Some(retry) = &policy.retry {
            if let Some(each) = retry.attempt_timeout {
                shorter = Some(now + each).filter(|d| *d < r.deadline);
            }
            // Another shard or node may answer NO_SERVICE or QUEUE_FULL
            // after the request left here: keep it for those too.
            if retry.needs_copy() || instances.get(&dest).is_some_and(|i| i.endpoint.is_pseudo()) {
                res.keep_copy(r);
            } else if !res.copies.is_empty() {
                res.drop_copy(&r.trans_id);
            }
        }
        Plan::Go(track, shorter)
    }

    /// What the policy of `name` says of a multicast copy chosen by
    /// `pattern`: refused by an open breaker (the message), or tracked for
    /// its breaker and instance. Copies are not retried: each is for its
    /// instance.
    pub(crate) fn plan_copy(&mut self, sender: InstanceId, name: &str, pattern: &Rc<str>) -> Result<Track, String> {
        let now = self.now;
        let outlier_only = self.sent_by_pseudo(sender);
        let Some(res) = self.resilience.as_deref_mut() else { return Ok(Track::default()) };
        let Some(policy) = res.policies.for_name(name).filter(|p| p.breaker.is_some() || p.outlier.is_some()).cloned()
        else {
            return Ok(Track::default());
        };
        let target = res.target(&policy, pattern, now);
        let mut track = Track { target, generation: res.generation, attempt: 0, probe: false, outlier_only };
        let t = &mut res.targets[target as usize];
        if let (false, Some(s), Some(b)) = (outlier_only, &policy.breaker, &mut t.breaker) {
            match b.admit(s, now) {
                Admission::Pass => {}
                Admission::Probe => track.probe = true,
                Admission::Refused(wait) => {
                    res.stats.refused += 1;
                    return Err(refused(&policy, pattern, wait));
                }
            }
        }
        t.counts.attempts += 1;
        Ok(track)
    }

    /// The outcome of a tracked request that reached (or was queued at)
    /// instance `dest`: counted for its breaker and its instance. Returns
    /// true when it is to be tried again (then the caller does not answer:
    /// the request stays in flight, waiting out its backoff).
    pub(crate) fn settle(
        &mut self,
        tid: TransId,
        f: &crate::state::InFlight,
        status: Status,
        dest: InstanceId,
    ) -> bool {
        let now = self.now;
        let Some(res) = self.resilience.as_deref_mut() else { return false };
        let track = f.track;
        if track.generation != res.generation {
            res.forget(&tid);
            return false;
        }
        let Some(t) = res.targets.get_mut(track.target as usize) else {
            res.forget(&tid);
            return false;
        };
        if status == Status::Ok {
            // The common case, kept short: the breaker and the instance
            // hear of a success; nothing is retried.
            let policy = &t.policy;
            if let (false, Some(s), Some(b)) = (track.outlier_only, &policy.breaker, &mut t.breaker) {
                b.record(s, false, track.probe, now);
            }
            if policy.outlier.is_some() {
                if !res.outliers.is_empty() {
                    res.outliers.remove(&dest);
                }
                if !res.ejected.is_empty() {
                    res.ejected.remove(&dest);
                }
            }
            res.stats.recovered += (track.attempt > 0) as u64;
            res.forget(&tid);
            return false;
        }
        let near = self.instances.get(&dest).is_some_and(|i| !i.endpoint.is_pseudo());
        let Some(res) = self.resilience.as_deref_mut() else { return false };
        let Some(t) = res.targets.get_mut(track.target as usize) else { return false };
        let policy = t.policy.clone();
        let pattern = t.pattern.clone();
        let failed = status != Status::Ok;
        if failed {
            t.counts.failures += 1;
        }
        if !track.outlier_only {
            if let (Some(s), Some(b)) = (&policy.breaker, &mut t.breaker) {
                let counted = s.failures.contains(status);
                if (counted || !failed) && b.record(s, counted, track.probe, now) == Some(BreakerState::Open) {
                    res.stats.trips += 1;
                    tracing::warn!(
                        "circuit breaker of policy '{}' for '{pattern}' opened ({status}); requests get UNAVAILABLE \
                         for {} ms",
                        policy.name,
                        s.open.as_millis()
                    );
                }
            }
        }
        if let (Some(s), true) = (&policy.outlier, near) {
            let counted = s.failures.contains(status);
            if counted || !failed {
                let o = res.outliers.entry(dest).or_default();
                if !counted {
                    res.outliers.remove(&dest);
                    res.ejected.remove(&dest);
                } else if o.record(s, true) {
                    self.eject(dest, &pattern, &policy, now);
                }
            }
        }
        let Some(res) = self.resilience.as_deref_mut() else { return false };
        if track.outlier_only {
            if failed && near && policy.retry.is_some() {
                if res.failed_here.len() >= MAX_REMEMBERED_FAILURES {
                    res.failed_here.clear();
                }
                res.failed_here.insert(tid, dest);
            }
            return false;
        }
        if !failed {
            res.stats.recovered += (track.attempt > 0) as u64;
            res.forget(&tid);
            return false;
        }
        // The request's own deadline (an attempt may have had a shorter
        // one): its copy kept it.
        let until = res.copies.get(&tid).map_or(now, |c| c.request.deadline);
        let retry_at = policy.retry.as_ref().and_then(|retry| {
            let again = retry.retries(status) && (track.attempt as u32) < retry.max_retries && !self.shutting_down;
            let at = now + retry.delay(track.attempt as u32 + 1, res.rng.f64());
            (again && at < until).then_some(at)
        });
        let Some(at) = retry_at.filter(|_| res.copies.contains_key(&tid)) else {
            res.stats.gave_up += (policy.retry.is_some() && track.attempt > 0) as u64;
            res.forget(&tid);
            return false;
        };
        let Some(request) = res.drop_copy(&tid) else { return false };
        res.targets[track.target as usize].counts.retries += 1;
        tracing::debug!("retrying {tid} to '{}' in {:?} after {status}", request.name, at - now);
        if let Some(spans) = self.spans.as_deref() {
            spans.attempt_failed(&tid, status);
        }
        let (sender, flags, accepted, timeout_ms) = (f.sender, f.flags, f.accepted, f.timeout_ms);
        let w = Waiting { at, request, avoid: dest, attempt: track.attempt + 1, timeout_ms, bytes: 0 };
        self.wait_for_retry(tid, w, sender, flags, accepted, until)
    }

    /// Keeps request `tid` in flight, parked until its retry at `w.at`
    /// (and answered TIMEOUT at `until` should it still wait then). False
    /// when the kept requests' bytes would pass `MAX_COPY_BYTES`: then it
    /// is not retried.
    fn wait_for_retry(
        &mut self,
        tid: TransId,
        mut w: Waiting,
        sender: InstanceId,
        flags: u8,
        accepted: Instant,
        until: Instant,
    ) -> bool {
        let Some(res) = self.resilience.as_deref_mut() else { return false };
        w.bytes = crate::held::weight(&w.request.name, &w.request.request_info, &w.request.request);
        if res.copy_bytes + w.bytes > MAX_COPY_BYTES {
            res.stats.uncopied += 1;
            return false;
        }
        res.copy_bytes += w.bytes;
        res.stats.retries += 1;
        let (at, timeout_ms) = (w.at, w.timeout_ms);
        res.waiting.insert(tid, w);
        let f = crate::state::InFlight {
            sender,
            dest: 0,
            deadline: until,
            accepted,
            timeout_ms,
            flags,
            held: crate::held::Held::No,
            for_restart: false,
            recheck: false,
            track: Track::default(),
        };
        self.inflight.insert(tid, f);
        self.arm_timer(tid, until);
        self.arm_timer(tid, at);
        true
    }

    /// Takes `dest` out of selection, unless that would leave fewer of the
    /// pattern's instances in than its policy keeps (never none).
    fn eject(&mut self, dest: InstanceId, pattern: &str, policy: &Policy, now: Instant) {
        let Some(s) = &policy.outlier else { return };
        let Some(res) = self.resilience.as_deref_mut() else { return };
        let instances: Vec<InstanceId> = self.registry.instances_of(pattern);
        let n = instances.len().max(1);
        let out = instances.iter().filter(|i| **i != dest && res.ejected.get(i).is_some_and(|u| *u > now)).count();
        let allowed = ((s.max_ejected_share * n as f64).floor() as usize).min(n - 1);
        if out + 1 > allowed {
            return;
        }
        let Some(o) = res.outliers.get_mut(&dest) else { return };
        let until = o.eject(s, now);
        res.ejected.insert(dest, until);
        res.stats.ejections += 1;
        let label = self.instances.get(&dest).map_or("an instance", |i| i.label.as_str());
        tracing::warn!(
            instance = dest,
            "{label} taken out of '{pattern}' for {} ms after {} failures in a row (policy '{}')",
            (until - now).as_millis(),
            s.consecutive_failures,
            policy.name
        );
    }

    /// A retry whose backoff is over: routed again, avoiding the instance
    /// that failed when another can take it.
    pub(crate) fn fire_retry(&mut self, tid: TransId) {
        let Some(res) = self.resilience.as_deref_mut() else { return };
        let Some(w) = res.waiting.remove(&tid) else { return };
        res.copy_bytes -= w.bytes;
        if !self.inflight.contains_key(&tid) {
            return; // answered meanwhile (a late answer of the last attempt)
        }
        let mut route = w.request.route();
        route.avoid = w.avoid;
        route.attempt = w.attempt;
        route.deadline = self.inflight.get(&tid).map_or(route.deadline, |f| f.deadline);
        // The attempt's own span, named as the parent of what it reaches.
        let next = self.spans.as_deref().and_then(|s| s.next_attempt(&tid, route.request_info, self.now));
        if let Some(info) = &next {
            route.request_info = info;
        }
        self.route(&route, true, w.timeout_ms);
    }

    /// An instance left: forget its run of failures.
    pub(crate) fn forget_instance(&mut self, id: InstanceId) {
        if let Some(r) = self.resilience.as_deref_mut() {
            r.outliers.remove(&id);
            r.ejected.remove(&id);
        }
    }

    /// The keep-alive round: ejections that are over leave the table, and
    /// so do copies of requests that ended on a path that does not settle
    /// them (a sender that went away took its queued requests along).
    pub(crate) fn sweep_resilience(&mut self, now: Instant) {
        let Some(r) = self.resilience.as_deref_mut() else { return };
        r.ejected.retain(|_, until| *until > now);
        let inflight = &self.inflight;
        let before = r.copies.len();
        r.copies.retain(|tid, _| inflight.contains_key(tid));
        if r.copies.len() != before {
            r.copy_bytes =
                r.copies.values().map(|c| c.bytes).sum::<usize>() + r.waiting.values().map(|w| w.bytes).sum::<usize>();
        }
    }

    /// Requests waiting out a backoff at a shutdown: answered now.
    pub(crate) fn drop_waiting_retries(&mut self) {
        let Some(r) = self.resilience.as_deref_mut() else { return };
        let waiting: Vec<TransId> = r.waiting.drain().map(|(t, _)| t).collect();
        r.copy_bytes = r.copies.values().map(|c| c.bytes).sum();
        for tid in waiting {
            if let Some(f) = self.inflight.remove(&tid) {
                self.respond(f.sender, &tid, Status::ShuttingDown, b"", b"the core is shutting down");
            }
        }
    }

    /// A request refused before delivery (NO_SERVICE, QUEUE_FULL,
    /// UNAVAILABLE) that its policy retries: kept in flight to be routed
    /// again after its backoff. False when it is not retried.
    pub(crate) fn retry_unsent(
        &mut self,
        r: &Route<'_>,
        rerouted: bool,
        timeout_ms: u32,
        status: Status,
        avoid: InstanceId,
    ) -> bool {
        let now = self.now;
        if self.shutting_down || self.sent_by_pseudo(r.sender) {
            return false;
        }
        let Some(res) = self.resilience.as_deref_mut() else { return false };
        let Some(retry) = res.policies.for_name(r.name).and_then(|p| p.retry.as_ref()) else { return false };
        if !retry.retries(status) || r.attempt as u32 >= retry.max_retries {
            return false;
        }
        let until = match self.inflight.get(&r.trans_id) {
            Some(f) if rerouted => f.deadline.max(r.deadline),
            _ => r.deadline,
        };
        let at = now + retry.delay(r.attempt as u32 + 1, res.rng.f64());
        if at >= until {
            return false;
        }
        res.drop_copy(&r.trans_id);
        if let Some(spans) = self.spans.as_deref() {
            spans.attempt_failed(&r.trans_id, status);
        }
        let accepted = match self.inflight.get(&r.trans_id) {
            Some(f) => f.accepted,
            None => until.checked_sub(Duration::from_millis(timeout_ms as u64)).unwrap_or(now),
        };
        let w = Waiting { at, request: r.to_owned(None), avoid, attempt: r.attempt + 1, timeout_ms, bytes: 0 };
        self.wait_for_retry(r.trans_id, w, r.sender, r.flags, accepted, until)
    }
}

/// The message of a request an open breaker refused.
fn refused(policy: &Policy, pattern: &str, wait: Duration) -> String {
    format!(
        "the circuit breaker of policy '{}' for '{pattern}' is open after repeated failures; it lets a probe through \
         in {} ms",
        policy.name,
        wait.as_millis()
    )
}
