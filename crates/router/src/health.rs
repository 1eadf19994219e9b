//! Health probes (`[service.health]`, docs/CONFIG.md): the core sends each
//! instance of such a service a request for `prefix + pattern` every
//! interval, when the instance subscribes that name. An instance that fails
//! `threshold` probes in a row (an error status, no answer within the
//! probe's timeout, a window too full to take one) is out of selection
//! until a probe succeeds; while it is the only instance left, it still
//! serves (`routing::select`'s second pass).
//!
//! A probe is a request the core originates (`PROBE_SENDER`, no instance):
//! its answer, or its timeout, comes back here instead of to a sender.

use crate::held::Held;
use crate::instance::Endpoint;
use crate::registry::InstanceId;
use crate::routing::Route;
use crate::state::{Core, InFlight};
use ahash::{AHashMap, AHashSet};
use cumulo_proto::{Status, TransId};
use std::time::{Duration, Instant};

/// The sender of probes: no instance has this id, so nothing else is
/// answered to it.
pub const PROBE_SENDER: InstanceId = 0;

#[derive(Debug)]
struct Probed {
    next_at: Instant,
    failures: u32,
}

#[derive(Debug, Default)]
pub struct Health {
    /// Probes in flight → the instance probed.
    probes: AHashMap<TransId, InstanceId>,
    instances: AHashMap<InstanceId, Probed>,
    unhealthy: AHashSet<InstanceId>,
    /// Probes sent and failed, ever (this shard).
    sent: u64,
    failed: u64,
}

impl Health {
    /// Instances out of selection for failed probes (None: none).
    #[inline]
    pub(crate) fn unhealthy(&self) -> Option<&AHashSet<InstanceId>> {
        Some(&self.unhealthy).filter(|u| !u.is_empty())
    }
}

/// What the admin API shows of the probes.
#[derive(Debug, Clone, Default)]
pub struct HealthReport {
    pub probed: u64,
    pub sent: u64,
    pub failed: u64,
    /// Instances out of selection now: (id, label).
    pub unhealthy: Vec<(InstanceId, String)>,
}

impl Core {
    /// Sends the probes that are due (the node calls it every 100 ms).
    pub fn health_tick(&mut self) {
        let now = self.refresh_now();
        // (instance, interval, timeout) of every instance probed: no
        // allocation per instance, the probe's name is made when one is due.
        let probed: Vec<(InstanceId, Duration, Duration)> = self
            .instances
            .values()
            .filter(|i| matches!(i.endpoint, Endpoint::Socket(_) | Endpoint::Internal(_)) && !i.retiring)
            .filter_map(|i| {
                let h = i.options.health.as_ref()?;
                Some((i.id, Duration::from_millis(h.interval_ms as u64), Duration::from_millis(h.timeout_ms as u64)))
            })
            .collect();
        if probed.is_empty() && self.health.is_none() {
            return;
        }
        let health = self.health.get_or_insert_with(Box::default);
        // An instance that left is forgotten as it leaves (`forget_probed`):
        // one that is still here but no longer probed (its options changed)
        // leaves more entries than probed instances.
        if health.instances.len() > probed.len() {
            let ids: AHashSet<InstanceId> = probed.iter().map(|p| p.0).collect();
            health.instances.retain(|id, _| ids.contains(id));
            health.unhealthy.retain(|id| ids.contains(id));
        }
        for (id, every, timeout) in probed {
            let health = self.health.as_deref_mut().expect("made above");
            // The first probe an interval after the instance is seen.
            let p = health.instances.entry(id).or_insert(Probed { next_at: now + every, failures: 0 });
            if now < p.next_at {
                continue;
            }
            p.next_at = now + every;
            let Some(inst) = self.instances.get(&id) else { continue };
            let Some(h) = inst.options.health.as_ref() else { continue };
            let name = format!("{}{}", inst.prefix, h.pattern);
            if self.registry.count(&name, id) == 0 {
                continue; // it does not subscribe the name: not probed
            }
            self.send_probe(id, &name, now, timeout);
        }
    }

    fn send_probe(&mut self, id: InstanceId, name: &str, now: Instant, timeout: Duration) {
        let Some(inst) = self.instances.get(&id) else { return };
        if !inst.is_free() {
            // A window full for a whole interval: as good as no answer.
            return self.probe_outcome(id, false, "its window and queue were full");
        }
        let tid = self.ids.next();
        let deadline = now + timeout;
        let route = Route {
            trans_id: tid,
            sender: PROBE_SENDER,
            deadline,
            priority: 0,
            flags: cumulo_proto::REQUEST_SYNC,
            wait_for_service: false,
            name,
            request_info: b"",
            request: b"",
            via: None,
            target: 0,
            avoid: 0,
            attempt: 0,
        };
        self.arm_timer(tid, deadline);
        self.inflight.insert(
            tid,
            InFlight {
                sender: PROBE_SENDER,
                dest: id,
                deadline,
                accepted: now,
                timeout_ms: timeout.as_millis() as u32,
                flags: cumulo_proto::REQUEST_SYNC,
                held: Held::No,
                for_restart: false,
                recheck: false,
                track: Default::default(),
            },
        );
        let health = self.health.as_deref_mut().expect("probes are sent with the table made");
        health.probes.insert(tid, id);
        health.sent += 1;
        let node = self.limits.node_id;
        if let Some(inst) = self.instances.get_mut(&id) {
            crate::routing::deliver(inst, &route, name, node, now);
        }
    }

    /// A probe's answer (`status`) or timeout (None); true if `tid` was one.
    #[cold]
    pub(crate) fn probe_answered(&mut self, tid: &TransId, status: Option<Status>) -> bool {
        let Some(id) = self.health.as_deref_mut().and_then(|h| h.probes.remove(tid)) else { return false };
        match status {
            Some(Status::Ok) => self.probe_outcome(id, true, ""),
            Some(s) => self.probe_outcome(id, false, s.name()),
            None => self.probe_outcome(id, false, "no answer in time"),
        }
        true
    }

    fn probe_outcome(&mut self, id: InstanceId, ok: bool, why: &str) {
        let Some(threshold) = self.instances.get(&id).and_then(|i| i.options.health.as_ref()).map(|h| h.threshold)
        else {
            return;
        };
        let label = self.instances.get(&id).map_or("an instance", |i| i.label.as_str());
        let Some(health) = self.health.as_deref_mut() else { return };
        let Some(p) = health.instances.get_mut(&id) else { return };
        if ok {
            p.failures = 0;
            if health.unhealthy.remove(&id) {
                tracing::info!(instance = id, "{label} answered its health probe: back in selection");
            }
            return;
        }
        health.failed += 1;
        p.failures += 1;
        if p.failures >= threshold && health.unhealthy.insert(id) {
            tracing::warn!(
                instance = id,
                "{label} failed {} health probes in a row ({why}): out of selection until a probe succeeds",
                p.failures
            );
        }
    }

    /// An instance left: forget its probes' state.
    pub(crate) fn forget_probed(&mut self, id: InstanceId) {
        if let Some(h) = self.health.as_deref_mut() {
            h.instances.remove(&id);
            h.unhealthy.remove(&id);
        }
    }

    pub fn health_report(&self) -> Option<HealthReport> {
        let h = self.health.as_deref()?;
        let mut unhealthy: Vec<(InstanceId, String)> = h
            .unhealthy
            .iter()
            .map(|id| (*id, self.instances.get(id).map_or_else(String::new, |i| i.label.clone())))
            .collect();
        unhealthy.sort();
        Some(HealthReport { probed: h.instances.len() as u64, sent: h.sent, failed: h.failed, unhealthy })
    }
}
