//! Which configured services could take a name that nothing subscribes now.
//!
//! A request for a name no instance subscribes is `NO_SERVICE`, failing
//! fast, when no configured service covers it (a typo) or when the service
//! that covers it serves other names (a name it does not serve). When the
//! covering service has no instance serving because its process is starting
//! or restarting, the request waits for one within its timeout, as with
//! WAIT_FOR_SERVICE; when the service was given up after too many crashes,
//! or is stopped, it gets `UNAVAILABLE` at once, saying so.
//!
//! The table is shared by every shard of the process (the supervisor on
//! shard 0 writes the states of its process slots; each shard counts the
//! instances of a service that hold subscriptions there). It is read only on
//! the way to NO_SERVICE, never on the routing hot path.

use crate::instance::ServiceId;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// What one process slot of a service is doing, as the router needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotPhase {
    /// Starting, restarting or stopping to restart: an instance is coming.
    Coming,
    Running,
    /// Gave up after too many restarts (`max_r` within `max_t`).
    GivenUp,
    Stopped,
}

impl SlotPhase {
    fn index(self) -> usize {
        self as usize
    }
}

/// One configured service: its prefix, the phases of its process slots and
/// how many of its instances hold a subscription.
#[derive(Debug)]
pub struct ServiceLive {
    id: ServiceId,
    prefix: Box<str>,
    /// Slots per phase (indexed by `SlotPhase`).
    slots: [AtomicU32; 4],
    /// Instances (on any shard) that subscribe at least one pattern.
    serving: AtomicU32,
    /// Whether any instance of it ever subscribed: a service that never
    /// does (an HTTP gateway, a client) serves no names, and a name under
    /// its prefix is NO_SERVICE even while it runs.
    ever_served: AtomicBool,
    /// When a slot or the instances serving last changed (ms since `EPOCH`).
    changed_ms: AtomicU64,
}

/// A running service that served and subscribes nothing this long after
/// its last change has stopped serving on purpose: NO_SERVICE then. Before
/// that, it is taken to be between its new process connecting and
/// subscribing, or between its process's crash and the supervisor seeing
/// it exit.
const SETTLE: Duration = Duration::from_secs(2);

/// An instance that has just subscribed its first pattern subscribes the
/// rest within milliseconds, and the other shards learn of each pattern a
/// moment later (their mirror). A request for a name under its prefix that
/// finds no subscriber within this long of that change looks again at the
/// end of it (`Verdict::Recheck`) before it is NO_SERVICE.
const SUBSCRIBING: Duration = Duration::from_millis(250);

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl ServiceLive {
    /// A slot of the service starts in `phase` (a new process slot).
    pub fn slot_added(&self, phase: SlotPhase) {
        self.slots[phase.index()].fetch_add(1, Ordering::Relaxed);
        self.touch();
    }

    fn touch(&self) {
        self.changed_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// A slot went from `from` to `to`.
    pub fn slot_changed(&self, from: SlotPhase, to: SlotPhase) {
        if from != to {
            decrement(&self.slots[from.index()]);
            self.slots[to.index()].fetch_add(1, Ordering::Relaxed);
            self.touch();
        }
    }

    /// A slot is gone (scaled down) from `phase`.
    pub fn slot_removed(&self, phase: SlotPhase) {
        decrement(&self.slots[phase.index()]);
    }

    /// Instances of the service, on any shard, that subscribe something.
    pub fn serving(&self) -> u32 {
        self.serving.load(Ordering::Relaxed)
    }

    fn count(&self, phase: SlotPhase) -> u32 {
        self.slots[phase.index()].load(Ordering::Relaxed)
    }

    /// What a request for a name this service covers, and that nothing
    /// subscribes, gets.
    fn verdict(&self, now_ms: u64) -> Verdict {
        if self.serving.load(Ordering::Relaxed) > 0 {
            let since = now_ms.saturating_sub(self.changed_ms.load(Ordering::Relaxed));
            let left = (SUBSCRIBING.as_millis() as u64).saturating_sub(since);
            return if left > 0 { Verdict::Recheck(Duration::from_millis(left)) } else { Verdict::NoService };
        }
        if self.count(SlotPhase::Coming) > 0 {
            return Verdict::Wait;
        }
        if self.count(SlotPhase::Running) > 0 {
            let settled = now_ms.saturating_sub(self.changed_ms.load(Ordering::Relaxed)) >= SETTLE.as_millis() as u64;
            let between = self.ever_served.load(Ordering::Relaxed) && !settled;
            return if between { Verdict::Wait } else { Verdict::NoService };
        }
        let prefix = &self.prefix;
        if self.count(SlotPhase::GivenUp) > 0 {
            return Verdict::Unavailable(format!(
                "service {prefix} was given up after too many crashes (max_r restarts within max_t); \
                 it stays down until restarted (cumulo services restart {prefix})"
            ));
        }
        Verdict::Unavailable(format!("service {prefix} is stopped: none of its processes runs"))
    }
}

/// Lowers a counter, never below zero (a slot or instance counted before
/// its service was registered again is not counted twice).
fn decrement(n: &AtomicU32) {
    let _ = n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(1)));
}

/// What a request for an unsubscribed name gets.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No configured service covers it, or the one that does serves.
    NoService,
    /// Its service's instance is coming: wait within the timeout.
    Wait,
    /// Its service's instance began serving moments ago (`SUBSCRIBING`):
    /// wait for the name this long at most, then look again.
    Recheck(Duration),
    /// Its service is given up or stopped.
    Unavailable(String),
}

/// The configured services of this process, shared by its shards. Bounded
/// by the services configured (the config file and the admin API's
/// `max_services`).
#[derive(Debug, Clone, Default)]
pub struct Availability(Arc<RwLock<Vec<Arc<ServiceLive>>>>);

impl Availability {
    /// Registers service `id` under `prefix` (replacing one of the same id)
    /// and returns its handle, for the supervisor to report its slots.
    pub fn register(&self, id: ServiceId, prefix: &str) -> Arc<ServiceLive> {
        let live = Arc::new(ServiceLive {
            id,
            prefix: prefix.into(),
            slots: Default::default(),
            serving: AtomicU32::new(0),
            ever_served: AtomicBool::new(false),
            changed_ms: AtomicU64::new(now_ms()),
        });
        let mut table = self.0.write().unwrap_or_else(|e| e.into_inner());
        table.retain(|s| s.id != id);
        table.push(live.clone());
        // The longest prefix first: the most specific service covers a name.
        table.sort_by_key(|s| std::cmp::Reverse(s.prefix.len()));
        live
    }

    /// Service `id` was removed: names under its prefix are no one's.
    pub fn unregister(&self, id: ServiceId) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).retain(|s| s.id != id);
    }

    fn find(&self, id: ServiceId) -> Option<Arc<ServiceLive>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).iter().find(|s| s.id == id).cloned()
    }

    /// An instance of service `id` subscribed its first pattern (`true`) or
    /// holds none any more (`false`).
    pub(crate) fn serving_changed(&self, id: ServiceId, serving: bool) {
        if let Some(s) = self.find(id) {
            if serving {
                s.serving.fetch_add(1, Ordering::Relaxed);
                s.ever_served.store(true, Ordering::Relaxed);
            } else {
                decrement(&s.serving);
            }
            s.touch();
        }
    }

    /// The prefix of a configured service that `pattern` could take names
    /// of (`trust::overlaps_prefix`), if any.
    pub(crate) fn service_under(&self, pattern: &str) -> Option<Box<str>> {
        let table = self.0.read().unwrap_or_else(|e| e.into_inner());
        table.iter().find(|s| crate::trust::overlaps_prefix(pattern, &s.prefix)).map(|s| s.prefix.clone())
    }

    /// The verdict for `name`, which nothing subscribes, by the service
    /// with the longest prefix that covers it.
    pub(crate) fn verdict(&self, name: &str) -> Verdict {
        let table = self.0.read().unwrap_or_else(|e| e.into_inner());
        match table.iter().find(|s| name.starts_with(&*s.prefix)) {
            Some(s) => s.verdict(now_ms()),
            None => Verdict::NoService,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_no_service_covers_is_no_service() {
        let a = Availability::default();
        a.register(1, "/api/").slot_added(SlotPhase::Coming);
        assert_eq!(a.verdict("/other/x"), Verdict::NoService);
        assert_eq!(a.verdict("/api/x"), Verdict::Wait);
    }

    #[test]
    fn a_service_that_serves_other_names_fails_fast() {
        let a = Availability::default();
        let s = a.register(1, "/api/");
        s.slot_added(SlotPhase::Running);
        assert_eq!(a.verdict("/api/users/get"), Verdict::NoService, "running, never subscribed: serves no names");
        a.serving_changed(1, true);
        assert!(matches!(a.verdict("/api/users/put"), Verdict::Recheck(left) if left <= SUBSCRIBING));
        let later = now_ms() + SUBSCRIBING.as_millis() as u64;
        assert_eq!(s.verdict(later), Verdict::NoService, "serving other names, settled");
        a.serving_changed(1, false);
        assert_eq!(a.verdict("/api/users/put"), Verdict::Wait, "its instance went away: it restarts");
        let later = now_ms() + SETTLE.as_millis() as u64;
        assert_eq!(s.verdict(later), Verdict::NoService, "running, serving nothing for long: stopped serving");
    }

    #[test]
    fn given_up_and_stopped_services_are_unavailable() {
        let a = Availability::default();
        let s = a.register(1, "/api/");
        s.slot_added(SlotPhase::Coming);
        s.slot_changed(SlotPhase::Coming, SlotPhase::GivenUp);
        assert!(matches!(a.verdict("/api/x"), Verdict::Unavailable(m) if m.contains("given up")));
        s.slot_changed(SlotPhase::GivenUp, SlotPhase::Stopped);
        assert!(matches!(a.verdict("/api/x"), Verdict::Unavailable(m) if m.contains("stopped")));
        a.unregister(1);
        assert_eq!(a.verdict("/api/x"), Verdict::NoService);
    }

    #[test]
    fn the_longest_prefix_decides() {
        let a = Availability::default();
        a.register(1, "/api/").slot_added(SlotPhase::GivenUp);
        a.register(2, "/api/users/").slot_added(SlotPhase::Coming);
        assert_eq!(a.verdict("/api/users/1/get"), Verdict::Wait);
        assert!(matches!(a.verdict("/api/orders/get"), Verdict::Unavailable(_)));
    }
}
