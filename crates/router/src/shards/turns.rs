//! One round-robin rotation per pattern for the whole core.
//!
//! With one shard a pattern's round-robin cursor is a field of its registry
//! entry. With several, each shard routes its own senders' requests (an
//! HTTP gateway's connections land on any shard), so per-shard cursors would
//! make several rotations: four workers would not be taken in turn by
//! sequential requests. So the shards share one cursor per pattern (an
//! atomic counter, fetched from this table once per registry entry, at its
//! first round-robin request) and order the pattern's instances the same
//! way (by instance id, every shard's instances included through the
//! mirrors), and the n-th request goes to the n-th instance of that order
//! whichever shard routes it. The counter is the one atomic on a routing
//! path, and only under `round_robin` with more than one thread.

use ahash::AHashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, Weak};

/// Entries kept before the table drops the cursors of patterns no shard
/// holds any more (their registry entries are gone); then again each time
/// it doubles. Bounds the table by the live patterns that used round robin.
const PRUNE_FROM: usize = 1024;

/// The shared cursors, by pattern (every shard has a handle).
#[derive(Clone, Default)]
pub struct Turns(Arc<Mutex<Table>>);

#[derive(Default)]
struct Table {
    cursors: AHashMap<Box<str>, Weak<AtomicU64>>,
    prune_at: usize,
}

impl Turns {
    /// The cursor of `pattern`, shared with every shard that asks for it
    /// while one still holds it.
    pub fn cursor(&self, pattern: &str) -> Arc<AtomicU64> {
        // A poisoned lock only means another shard panicked holding it; the
        // table itself is still whole.
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = t.cursors.get(pattern).and_then(Weak::upgrade) {
            return c;
        }
        if t.cursors.len() >= t.prune_at.max(PRUNE_FROM) {
            t.cursors.retain(|_, c| c.strong_count() > 0);
            t.prune_at = 2 * t.cursors.len();
        }
        let c = Arc::new(AtomicU64::new(0));
        t.cursors.insert(pattern.into(), Arc::downgrade(&c));
        c
    }

    /// Patterns in the table (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap().cursors.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn shards_asking_for_one_pattern_share_its_cursor() {
        let turns = Turns::default();
        let (a, b) = (turns.cursor("/p/x"), turns.clone().cursor("/p/x"));
        a.fetch_add(1, Ordering::Relaxed);
        assert_eq!(b.fetch_add(1, Ordering::Relaxed), 1);
        assert_eq!(turns.cursor("/p/y").load(Ordering::Relaxed), 0, "another pattern, another cursor");
    }

    #[test]
    fn cursors_nobody_holds_are_dropped() {
        let turns = Turns::default();
        for n in 0..10 * PRUNE_FROM {
            drop(turns.cursor(&format!("/p/{n}")));
        }
        assert!(turns.len() <= PRUNE_FROM + 1, "{}", turns.len());
        let kept = turns.cursor("/p/kept");
        for n in 0..10 * PRUNE_FROM {
            drop(turns.cursor(&format!("/q/{n}")));
        }
        assert!(Arc::ptr_eq(&kept, &turns.cursor("/p/kept")), "a held cursor stays");
    }
}
