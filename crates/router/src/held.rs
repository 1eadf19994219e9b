//! The requests the core holds on to (queued for an instance, or parked
//! waiting for a subscriber) and what they weigh: bytes per sender and in
//! total, and per sender which requests, so that a sender that goes away
//! takes its held requests out of the core at once, in time linear in what
//! it had held. (Bytes per instance are counted by its queue.)

use crate::instance::OwnedRequest;
use crate::queue::QueueKey;
use crate::registry::InstanceId;
use crate::state::{Core, Limits};
use ahash::{AHashMap, AHashSet};
use cumulo_proto::TransId;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Bytes the core spends on a held request besides its payload and name:
/// the request itself (~120 B), its in-flight entry (~80 B), its timer and
/// index entries; rounded up, so that the byte limits also bound requests
/// with empty payloads.
pub const REQUEST_OVERHEAD: usize = 256;

/// Where a request in flight is held, if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Delivered, or being routed.
    No,
    /// In the queue of its `dest` instance.
    Queued(QueueKey),
    /// Parked, waiting for a subscriber, under this arrival number.
    Parked(u64),
}

/// Requests waiting for a subscriber (WAIT_FOR_SERVICE), by arrival and by
/// name. A new subscription takes out only the requests its pattern
/// matches, found by name: one lookup for an exact pattern; for a wildcard
/// one, the range of names that start with its literal prefix (the names
/// are kept in order), one match each. Routing every waiting request again
/// on every SUBSCRIBE made one peer's subscriptions (or another node's
/// snapshot of thousands) cost the event loop subscriptions x waiting
/// requests.
#[derive(Default)]
pub struct Parked {
    by_arrival: BTreeMap<u64, OwnedRequest>,
    by_name: BTreeMap<Box<str>, BTreeSet<u64>>,
    next: u64,
    /// Names looked at by `take_matching`, for the tests that bound it.
    #[cfg(test)]
    examined: u64,
}

impl Parked {
    pub fn len(&self) -> usize {
        self.by_arrival.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_arrival.is_empty()
    }

    /// Distinct names waiting (what a wildcard subscription looks through).
    #[cfg(test)]
    pub fn names(&self) -> usize {
        self.by_name.len()
    }

    /// Parks `q`; returns its arrival number.
    fn insert(&mut self, q: OwnedRequest) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.by_name.entry(q.name.clone()).or_default().insert(seq);
        self.by_arrival.insert(seq, q);
        seq
    }

    fn remove(&mut self, seq: u64) -> Option<OwnedRequest> {
        let q = self.by_arrival.remove(&seq)?;
        if let Some(seqs) = self.by_name.get_mut(&q.name) {
            seqs.remove(&seq);
            if seqs.is_empty() {
                self.by_name.remove(&q.name);
            }
        }
        Some(q)
    }

    /// Every parked request, oldest first, taken out.
    pub fn take_all(&mut self) -> Vec<OwnedRequest> {
        self.by_name.clear();
        std::mem::take(&mut self.by_arrival).into_values().collect()
    }

    /// The parked requests whose name `pattern` matches, oldest first,
    /// taken out. A wildcard pattern looks only at the names that start
    /// with its literal prefix.
    fn take_matching(&mut self, pattern: &str) -> Vec<OwnedRequest> {
        let mut seqs: Vec<u64> = if cumulo_pattern::has_wildcard(pattern) {
            let prefix = cumulo_pattern::literal_prefix(pattern);
            let range = self.by_name.range::<str, _>((Bound::Included(prefix), Bound::Unbounded));
            let under: Vec<&Box<str>> = range.map(|(n, _)| n).take_while(|n| n.starts_with(prefix)).collect();
            #[cfg(test)]
            {
                self.examined += under.len() as u64;
            }
            let names: Vec<Box<str>> =
                under.into_iter().filter(|n| cumulo_pattern::matches(pattern, n)).cloned().collect();
            names.iter().filter_map(|n| self.by_name.remove(n)).flatten().collect()
        } else {
            #[cfg(test)]
            {
                self.examined += 1;
            }
            self.by_name.remove(pattern).map(|s| s.into_iter().collect()).unwrap_or_default()
        };
        seqs.sort_unstable();
        seqs.iter().filter_map(|s| self.by_arrival.remove(s)).collect()
    }
}

/// What one sender has held.
#[derive(Default)]
struct SenderHolds {
    bytes: usize,
    requests: AHashSet<TransId>,
}

#[derive(Default)]
pub struct Holds {
    total: usize,
    senders: AHashMap<InstanceId, SenderHolds>,
}

/// What holding a request costs the core, bytes.
pub fn weight(name: &str, request_info: &[u8], request: &[u8]) -> usize {
    name.len() + request_info.len() + request.len() + REQUEST_OVERHEAD
}

impl OwnedRequest {
    pub fn held_bytes(&self) -> usize {
        weight(&self.name, &self.request_info, &self.request)
    }
}

impl Holds {
    /// Bytes held core-wide.
    #[cfg(test)]
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes held for `sender`.
    pub fn of_sender(&self, sender: InstanceId) -> usize {
        self.senders.get(&sender).map_or(0, |s| s.bytes)
    }

    /// Whether `bytes` more may be held for `sender`; if not, why (the
    /// message of its QUEUE_FULL).
    pub fn room(&self, sender: InstanceId, bytes: usize, limits: &Limits) -> Result<(), String> {
        let mine = self.of_sender(sender);
        if mine + bytes > limits.max_sender_queued_bytes {
            return Err(format!(
                "this sender already has {mine} bytes of requests waiting in the core; {bytes} more would pass \
                 core.max_sender_queued_bytes ({})",
                limits.max_sender_queued_bytes
            ));
        }
        if self.total + bytes > limits.max_queued_bytes {
            return Err(format!(
                "the core already holds {} bytes of waiting requests; {bytes} more would pass core.max_queued_bytes ({})",
                self.total, limits.max_queued_bytes
            ));
        }
        Ok(())
    }

    /// Counts a request the core starts to hold.
    pub fn hold(&mut self, q: &OwnedRequest) {
        let bytes = q.held_bytes();
        self.total += bytes;
        let s = self.senders.entry(q.sender).or_default();
        s.bytes += bytes;
        s.requests.insert(q.trans_id);
    }

    /// Counts a request the core no longer holds (delivered, timed out,
    /// taken out to be routed again, dropped).
    pub fn release(&mut self, q: &OwnedRequest) {
        self.total -= q.held_bytes();
        if let Some(s) = self.senders.get_mut(&q.sender) {
            s.bytes -= q.held_bytes();
            s.requests.remove(&q.trans_id);
            if s.requests.is_empty() {
                self.senders.remove(&q.sender);
            }
        }
    }

    /// Forgets everything (the core is shutting down and dropped it all).
    pub fn clear(&mut self) {
        *self = Holds::default();
    }
}

impl Core {
    /// Queues a request for instance `dest` (routing checked its room).
    pub(crate) fn enqueue(&mut self, dest: InstanceId, q: OwnedRequest) {
        let Some(inst) = self.instances.get_mut(&dest) else { return };
        self.holds.hold(&q);
        let (tid, bytes) = (q.trans_id, q.held_bytes());
        let key = inst.queue.push(q.priority, q, bytes);
        if let Some(f) = self.inflight.get_mut(&tid) {
            f.held = Held::Queued(key);
        }
    }

    /// Parks a request until a pattern matching its name is subscribed.
    pub(crate) fn park(&mut self, q: OwnedRequest) {
        self.holds.hold(&q);
        let tid = q.trans_id;
        let seq = self.parked.insert(q);
        if let Some(f) = self.inflight.get_mut(&tid) {
            f.held = Held::Parked(seq);
        }
    }

    /// Takes a held request out of its queue or the parked ones, by where
    /// its in-flight entry says it is.
    pub(crate) fn unhold(&mut self, held: Held, dest: InstanceId) -> Option<OwnedRequest> {
        let q = match held {
            Held::No => None,
            Held::Queued(key) => self.instances.get_mut(&dest).and_then(|i| i.queue.remove(key)),
            Held::Parked(seq) => self.parked.remove(seq),
        }?;
        self.holds.release(&q);
        Some(q)
    }

    /// The parked requests `pattern` (a full pattern, just subscribed)
    /// matches, taken out to be routed again, oldest first.
    pub(crate) fn unpark_matching(&mut self, pattern: &str) -> Vec<OwnedRequest> {
        let taken = self.parked.take_matching(pattern);
        for q in &taken {
            self.holds.release(q);
        }
        taken
    }

    /// A sender went away: nobody can receive the answers of the requests
    /// it has queued or parked, so they leave the core now, timers and all,
    /// instead of holding their bytes until they time out. Requests already
    /// delivered stay with their handlers (they hold no payload here).
    pub(crate) fn drop_held_of(&mut self, sender: InstanceId) {
        let Some(s) = self.holds.senders.remove(&sender) else { return };
        let n = s.requests.len();
        for tid in s.requests {
            let Some(f) = self.inflight.remove(&tid) else { continue };
            let q = match f.held {
                Held::No => None,
                Held::Queued(key) => self.instances.get_mut(&f.dest).and_then(|i| i.queue.remove(key)),
                Held::Parked(seq) => self.parked.remove(seq),
            };
            if let Some(q) = q {
                // The sender's entry is gone: only the total is left to count.
                self.holds.total -= q.held_bytes();
            }
        }
        let label = self.instances.get(&sender).map_or("a sender", |i| i.label.as_str());
        tracing::info!(
            instance = sender,
            "{label} went away: dropped the {n} requests it had waiting (nobody can receive their answers)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn request(sender: InstanceId, n: u8, payload: usize) -> OwnedRequest {
        let mut trans_id = [0u8; 16];
        trans_id[0] = n;
        OwnedRequest {
            trans_id: TransId(trans_id),
            sender,
            deadline: Instant::now(),
            priority: 0,
            flags: 0,
            wait_for_service: false,
            name: "/a/b".into(),
            pattern: None,
            request_info: Box::new([]),
            request: vec![0; payload].into(),
            target: 0,
        }
    }

    fn named(n: u8, name: &str) -> OwnedRequest {
        OwnedRequest { name: name.into(), ..request(1, n, 0) }
    }

    fn ids(taken: &[OwnedRequest]) -> Vec<u8> {
        taken.iter().map(|q| q.trans_id.0[0]).collect()
    }

    #[test]
    fn a_subscription_takes_out_only_the_parked_requests_it_matches_oldest_first() {
        let mut p = Parked::default();
        for (n, name) in [(1, "/a/b"), (2, "/x/y"), (3, "/a/c"), (4, "/a/b"), (5, "/a/b/deeper")] {
            p.insert(named(n, name));
        }
        assert_eq!((p.len(), p.names()), (5, 4));
        // An exact pattern: one lookup; nothing else is touched.
        assert!(p.take_matching("/nobody").is_empty());
        assert_eq!(ids(&p.take_matching("/a/b")), [1, 4]);
        assert_eq!((p.len(), p.names()), (3, 3));
        // A wildcard: the names it matches, in arrival order across names.
        p.insert(named(6, "/a/d"));
        assert_eq!(ids(&p.take_matching("/a/?")), [3, 6]);
        assert_eq!(ids(&p.take_matching("/a/*")), [5]);
        assert_eq!(ids(&p.take_all()), [2]);
        assert_eq!((p.len(), p.names()), (0, 0));
    }

    #[test]
    fn a_parked_request_taken_out_by_its_number_leaves_the_name_index() {
        let mut p = Parked::default();
        let first = p.insert(named(1, "/a/b"));
        p.insert(named(2, "/a/b"));
        assert_eq!(p.remove(first).map(|q| q.trans_id.0[0]), Some(1));
        assert!(p.remove(first).is_none());
        assert_eq!(ids(&p.take_matching("/a/b")), [2]);
        assert_eq!(p.names(), 0, "an emptied name is forgotten");
    }

    #[test]
    fn a_wildcard_subscription_looks_only_at_the_names_under_its_literal_prefix() {
        let mut p = Parked::default();
        for i in 0..2000u32 {
            p.insert(OwnedRequest { name: format!("/w/{i}").into(), ..request(1, (i % 251) as u8, 0) });
        }
        // `/w/12`, `/w/120`..`/w/129`, `/w/1200`..`/w/1299` start with the
        // prefix; the pattern needs a character after it.
        let taken = p.take_matching("/w/12*");
        assert_eq!(p.examined, 111);
        assert_eq!(taken.len(), 110);
        let names: Vec<&str> = taken.iter().map(|q| &*q.name).collect();
        assert_eq!(names[..3], ["/w/120", "/w/121", "/w/122"], "oldest first");
        assert_eq!(p.len(), 1890);
    }

    /// One peer's subscriptions against the most requests that may wait
    /// (`core.max_parked`, 10,000, with distinct names): each subscription
    /// that matches none of them looks at no more names than its literal
    /// prefix shares with them, where every wildcard one used to match all
    /// 10,000 names (10 million matches for 1,000 subscriptions).
    #[test]
    fn subscriptions_matching_no_waiting_name_look_at_almost_none() {
        let mut p = Parked::default();
        for i in 0..10_000u32 {
            p.insert(OwnedRequest { name: format!("/waiting/{i}/{}", "a".repeat(64)).into(), ..request(1, 0, 0) });
        }
        let started = Instant::now();
        for j in 0..1_000 {
            let pattern = match j % 4 {
                0 => format!("/other/{j}/*"),
                1 => format!("/waiting/{j}x*"),
                2 => format!("/waiting/{j}/?b"),
                _ => format!("/waiting/nobody/{j}"),
            };
            assert!(p.take_matching(&pattern).is_empty(), "{pattern}");
        }
        let elapsed = started.elapsed();
        // `/waiting/{j}/?b` looks at the one name under `/waiting/{j}/`;
        // an exact pattern is one lookup.
        assert!(p.examined <= 500, "{} names looked at", p.examined);
        assert_eq!(p.len(), 10_000);
        eprintln!("1,000 subscriptions against 10,000 waiting names: {elapsed:?}, {} names looked at", p.examined);
    }

    fn limits(per_sender: usize, total: usize) -> Limits {
        Limits { max_sender_queued_bytes: per_sender, max_queued_bytes: total, ..crate::test_util::small_limits() }
    }

    #[test]
    fn room_is_counted_per_sender_and_in_total() {
        let l = limits(2000, 3500);
        let mut h = Holds::default();
        let a = request(1, 1, 1000);
        assert_eq!(a.held_bytes(), 1000 + 4 + REQUEST_OVERHEAD);
        h.hold(&a);
        assert!(h.room(1, 1000, &l).unwrap_err().contains("max_sender_queued_bytes"));
        h.hold(&request(2, 2, 1500));
        assert!(h.room(3, 1000, &l).unwrap_err().contains("max_queued_bytes"));
        assert!(h.room(3, 100, &l).is_ok());
        h.release(&a);
        assert_eq!((h.of_sender(1), h.total()), (0, 1500 + 4 + REQUEST_OVERHEAD));
        assert!(h.room(1, 1000, &l).is_ok());
    }
}
