//! What another shard's instances subscribe, instance by instance.
//!
//! A shard's pseudo-instance in this core holds that shard's subscriptions
//! as counts per pattern, which is all that routing one request needs. A
//! multicast needs more: "one copy per instance" means an instance there
//! subscribed to two matching patterns still gets one copy, and only the
//! instances there know which patterns they share. The mirror keeps, per
//! pattern, which instances of that shard subscribe it, from the same
//! deltas (`Message::Subscriptions`), so that this shard counts the copies
//! and names each copy's instance (`Route::target`) when the multicast is
//! made, and the sender learns the exact number of copies at once.

use crate::registry::InstanceId;
use ahash::{AHashMap, AHashSet};
use std::rc::Rc;

/// One subscription change of another shard, as the replication carries it.
#[derive(Debug, Clone)]
pub struct Change {
    pub pattern: Box<str>,
    /// The instance there (ids are unique across shards: `Core::new_id`).
    pub instance: InstanceId,
    /// Subscriptions added, negative when removed.
    pub delta: i32,
    /// The instance stands for several (another node's pseudo-instance on
    /// that shard, subscribed once per instance of that node): it gets one
    /// copy per subscription, as that shard would give it.
    pub many: bool,
}

/// How one instance of another shard holds one pattern.
#[derive(Debug, Clone, Copy)]
struct Held {
    count: u32,
    many: bool,
}

/// Another shard's subscriptions by pattern and instance. Bounded by that
/// shard's own registry (its instances' `core.max_subscriptions`); a change
/// costs O(1), so a shard whose thousands of subscriptions go costs this
/// one work in proportion to them only.
#[derive(Debug, Default)]
pub struct Mirror {
    by_pattern: AHashMap<Rc<str>, AHashMap<InstanceId, Held>>,
}

impl Mirror {
    /// Applies `n` subscriptions added (negative: removed) of `instance` to
    /// `pattern`.
    pub fn apply(&mut self, pattern: &Rc<str>, instance: InstanceId, n: i32, many: bool) {
        if n > 0 {
            let held =
                self.by_pattern.entry(pattern.clone()).or_default().entry(instance).or_insert(Held { count: 0, many });
            held.count += n as u32;
            held.many = many;
            return;
        }
        let Some(holders) = self.by_pattern.get_mut(pattern) else { return };
        if let Some(held) = holders.get_mut(&instance) {
            held.count = held.count.saturating_sub(n.unsigned_abs());
            if held.count == 0 {
                holders.remove(&instance);
            }
        }
        if holders.is_empty() {
            self.by_pattern.remove(pattern);
        }
    }

    /// The copies a multicast matching `pattern` gives that shard, by the
    /// instance there that serves each, skipping instances already given one
    /// for a more specific pattern (`seen`).
    pub fn copies(&self, pattern: &str, seen: &mut AHashSet<InstanceId>, out: &mut Vec<InstanceId>) {
        let Some(holders) = self.by_pattern.get(pattern) else { return };
        for (&target, held) in holders {
            if held.many {
                out.extend(std::iter::repeat_n(target, held.count as usize));
            } else if seen.insert(target) {
                out.push(target);
            }
        }
    }

    /// The instances there that subscribe `pattern`, each with how many
    /// times.
    pub fn holders<'a>(&'a self, pattern: &str) -> impl Iterator<Item = (InstanceId, u32)> + 'a {
        self.by_pattern.get(pattern).into_iter().flat_map(|h| h.iter().map(|(id, held)| (*id, held.count)))
    }

    /// Patterns held (tests).
    pub fn len(&self) -> usize {
        self.by_pattern.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_pattern.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copies(m: &Mirror, patterns: &[&str]) -> Vec<InstanceId> {
        let mut seen = AHashSet::new();
        let mut out = Vec::new();
        for p in patterns {
            m.copies(p, &mut seen, &mut out);
        }
        out.sort();
        out
    }

    #[test]
    fn an_instance_matching_by_two_patterns_gets_one_copy() {
        let (x, star, q): (Rc<str>, Rc<str>, Rc<str>) = ("/m/x".into(), "/m/*".into(), "/m/?".into());
        let mut m = Mirror::default();
        m.apply(&x, 7, 1, false);
        m.apply(&star, 7, 1, false);
        m.apply(&q, 9, 1, false);
        assert_eq!(copies(&m, &["/m/x", "/m/*", "/m/?"]), [7, 9]);
    }

    #[test]
    fn another_nodes_pseudo_instance_gets_one_copy_per_subscription() {
        let p: Rc<str> = "/n/x".into();
        let mut m = Mirror::default();
        m.apply(&p, 3, 2, true);
        m.apply(&p, 4, 1, false);
        assert_eq!(copies(&m, &["/n/x"]), [3, 3, 4]);
    }

    #[test]
    fn removals_empty_it() {
        let p: Rc<str> = "/m/x".into();
        let mut m = Mirror::default();
        m.apply(&p, 7, 2, false);
        m.apply(&p, 7, -1, false);
        assert_eq!(copies(&m, &["/m/x"]), [7]);
        m.apply(&p, 7, -1, false);
        assert!(m.is_empty());
        // A removal of what was never there changes nothing.
        m.apply(&p, 8, -1, false);
        assert!(m.is_empty());
    }
}
