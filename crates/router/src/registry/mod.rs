//! The registry of subscriptions: which instances serve which patterns, and
//! which pattern a name resolves to.
//!
//! Exact patterns are one hash lookup. Wildcard patterns are indexed by their
//! literal prefix (`prefix_index`): a lookup walks the name once along the
//! index and tries only the patterns whose prefix starts the name, whose
//! literal suffix ends it and which are not longer than it, most specific
//! first, each in O(wildcards x name) against the name prepared once per
//! lookup (`pattern::Name`: the bitmaps its matcher makes of the name serve
//! every candidate). A name's answer is cached until the set of wildcard
//! patterns changes, so steady traffic costs one or two hash lookups per
//! request whatever the number of patterns.

use ahash::{AHashMap, AHashSet};
use cumulo_pattern as pattern;
use cumulo_pattern::{PrefixIndex, Shape};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub type InstanceId = u32;

/// Names remembered per generation of the wildcard set; past this the cache
/// is cleared, so a sender cycling through unique names cannot grow it
/// without bound.
const CACHE_LIMIT: usize = 65_536;
/// Bytes of names the cache may hold (keys up to `core.max_name` each, plus
/// [`CACHE_ENTRY_OVERHEAD`] per entry): 16 MiB, so that long unique names
/// cannot make it hold 65,536 x 8 KiB = 512 MiB.
const CACHE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes counted per cache entry besides its name: the hash table slot
/// (key pointer and length, the answer) and the name's allocation header.
const CACHE_ENTRY_OVERHEAD: usize = 48;
/// Subscriptions released before the registry gives memory back: shrinking
/// the tables and returning the heap's free pages to the system costs time
/// proportional to the heap, so it is done after large releases only.
const TRIM_AFTER: usize = 4096;
/// At most one heap trim per this interval, however fast subscriptions come
/// and go.
const TRIM_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct PatternEntry {
    pub pattern: Rc<str>,
    /// One element per subscription: an instance subscribed twice appears
    /// twice and gets twice the share of random selection.
    pub instances: Vec<InstanceId>,
    pub literal_len: usize,
    /// Has wildcards: never an exact match for a name spelled like it.
    pub wild: bool,
    /// Round-robin cursor for this pattern.
    pub next: usize,
    /// With several shards: the cursor every shard shares for this pattern
    /// (`shards::turns`), taken at the first round-robin request.
    pub turn: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

#[derive(Debug, Default)]
pub struct Registry {
    entries: AHashMap<Rc<str>, PatternEntry>,
    /// Wildcard patterns by literal prefix.
    wildcards: PrefixIndex,
    cache: NameCache,
    /// Subscriptions removed since memory was last given back.
    released: usize,
    last_trim: Option<Instant>,
    /// What changed since the shards' replication task last looked.
    pub journal: Journal,
    /// What the lookups cost, for the tests that bound it.
    #[cfg(test)]
    cost: std::cell::Cell<Cost>,
}

/// Candidate patterns tried and matcher steps taken (bitmaps of the name
/// included), summed over lookups.
#[cfg(test)]
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    tried: u64,
    steps: u64,
}

/// The net changes to this registry's own subscriptions (pattern and
/// instance → count added, negative when removed) since the shards'
/// replication task (src/shards) last took them, so that it sends other
/// shards a delta, not the whole registry. Instance by instance, because a
/// multicast from another shard gives each instance here one copy however
/// many of its patterns match (`shards::Mirror`). Kept only with more than
/// one shard. Bounded by the subscriptions that changed since the last
/// take, which the registry's own bounds (core.max_subscriptions per
/// instance, core.max_connections) bound.
#[derive(Debug, Default)]
pub struct Journal {
    /// Whether changes are noted at all (`core.threads` > 1).
    pub on: bool,
    /// Instances whose subscriptions are not replicated: the other shards'
    /// pseudo-instances (a request crosses one shard boundary at most).
    pub skip: Vec<InstanceId>,
    /// Net change per pattern and instance since the last take.
    pub pending: AHashMap<(Rc<str>, InstanceId), i32>,
    /// Woken on every noted change: the replication task waits on it.
    pub changed: Rc<tokio::sync::Notify>,
}

impl Journal {
    fn note(&mut self, pattern: &Rc<str>, instance: InstanceId, delta: i32) {
        if !self.on || self.skip.contains(&instance) {
            return;
        }
        *self.pending.entry((pattern.clone(), instance)).or_default() += delta;
        self.changed.notify_one();
    }

    /// The changes since the last take, without the ones that cancelled out.
    pub fn take(&mut self) -> Vec<(Rc<str>, InstanceId, i32)> {
        let mut out: Vec<_> = self.pending.drain().filter(|(_, n)| *n != 0).map(|((p, i), n)| (p, i, n)).collect();
        if self.pending.capacity() > 1024 {
            self.pending.shrink_to_fit();
        }
        out.shrink_to_fit();
        out
    }
}

/// Each name's best wildcard pattern (or none), bounded in count and bytes.
#[derive(Debug, Default)]
struct NameCache {
    map: AHashMap<Box<str>, Option<Rc<str>>>,
    bytes: usize,
}

impl NameCache {
    fn get(&self, name: &str) -> Option<&Option<Rc<str>>> {
        self.map.get(name)
    }

    fn insert(&mut self, name: &str, best: Option<Rc<str>>) {
        let cost = name.len() + CACHE_ENTRY_OVERHEAD;
        if self.map.len() >= CACHE_LIMIT || self.bytes + cost > CACHE_BYTES {
            self.clear();
        }
        self.bytes += cost;
        self.map.insert(name.into(), best);
    }

    /// Forgets every answer and gives the table's memory back.
    fn clear(&mut self) {
        if !self.map.is_empty() {
            *self = NameCache::default();
        }
    }
}

impl Registry {
    /// Adds one subscription of `instance` to the full `pattern` (already
    /// validated). Returns the shared pattern string.
    pub fn subscribe(&mut self, full: &str, instance: InstanceId) -> Rc<str> {
        if let Some(e) = self.entries.get_mut(full) {
            e.instances.push(instance);
            self.journal.note(&e.pattern, instance, 1);
            return e.pattern.clone();
        }
        let key: Rc<str> = Rc::from(full);
        let literal_len = pattern::literal_len(full);
        let wild = pattern::has_wildcard(full);
        self.entries.insert(
            key.clone(),
            PatternEntry { pattern: key.clone(), instances: vec![instance], literal_len, wild, next: 0, turn: None },
        );
        if wild {
            let shape = Shape {
                literal_len,
                suffix_len: pattern::literal_suffix(full).len(),
                min_name: literal_len + pattern::wildcard_count(full),
            };
            self.wildcards.insert(pattern::literal_prefix(full).as_bytes(), key.clone(), shape);
            self.cache.clear();
        }
        self.journal.note(&key, instance, 1);
        key
    }

    /// Removes one subscription; false if there was none.
    pub fn unsubscribe(&mut self, full: &str, instance: InstanceId) -> bool {
        let Some(e) = self.entries.get_mut(full) else { return false };
        let Some(i) = e.instances.iter().position(|&x| x == instance) else { return false };
        e.instances.remove(i);
        self.released += 1;
        self.journal.note(&e.pattern, instance, -1);
        if e.instances.is_empty() {
            let wild = e.wild;
            self.entries.remove(full);
            if wild {
                self.wildcards.remove(pattern::literal_prefix(full).as_bytes(), full);
                self.cache.clear();
            }
        }
        true
    }

    /// How many times `instance` subscribed `full`.
    pub fn count(&self, full: &str, instance: InstanceId) -> u32 {
        self.entries.get(full).map_or(0, |e| e.instances.iter().filter(|&&x| x == instance).count() as u32)
    }

    /// Whether some pattern matching `name` has a subscriber: `lookup`'s
    /// answer without its cache, so that a probe (the HTTP gateway's 405)
    /// does not fill the cache with names no request is sent to.
    pub fn serves(&self, name: &str) -> bool {
        self.entries.get(name).is_some_and(|e| !e.wild) || {
            let mut prepared = pattern::Name::new(name);
            self.candidates(name).into_iter().any(|p| self.try_pattern(&mut prepared, p))
        }
    }

    /// The most specific pattern matching `name`, with its instances.
    pub fn lookup(&mut self, name: &str) -> Option<&mut PatternEntry> {
        // A name spelled like a wildcard pattern is still matched as a name.
        if self.entries.get(name).is_some_and(|e| !e.wild) {
            return self.entries.get_mut(name);
        }
        let best = match self.cache.get(name) {
            Some(hit) => hit.clone(),
            None => {
                let mut prepared = pattern::Name::new(name);
                let found = self.candidates(name).into_iter().find(|p| self.try_pattern(&mut prepared, p)).cloned();
                self.cache.insert(name, found.clone());
                found
            }
        };
        best.and_then(move |p| self.entries.get_mut(&*p))
    }

    /// Whether the prepared name matches the wildcard pattern `p` (one
    /// prepared name per lookup: its bitmaps serve every candidate).
    fn try_pattern(&self, name: &mut pattern::Name<'_>, p: &str) -> bool {
        #[cfg(test)]
        {
            let setup = name.setup_steps();
            let (found, steps) = name.matches_counted(p);
            let cost = &self.cost;
            cost.set(Cost {
                tried: cost.get().tried + 1,
                steps: cost.get().steps + steps + name.setup_steps() - setup,
            });
            found
        }
        #[cfg(not(test))]
        name.matches(p)
    }

    /// The wildcard patterns that may match `name`, most specific first:
    /// those whose literal prefix starts it (from the index), whose literal
    /// suffix ends it, and that are not longer than it.
    fn candidates(&self, name: &str) -> Vec<&Rc<str>> {
        let mut found: Vec<(&Rc<str>, usize)> = Vec::new();
        self.wildcards.candidates(name.as_bytes(), |p, s| {
            if name.len() >= s.min_name && name.as_bytes().ends_with(&p.as_bytes()[p.len() - s.suffix_len..]) {
                found.push((p, s.literal_len));
            }
        });
        found.sort_unstable_by(|(a, la), (b, lb)| lb.cmp(la).then_with(|| a.cmp(b)));
        found.into_iter().map(|(p, _)| p).collect()
    }

    /// Every instance subscribed to any pattern matching `name`, each once,
    /// with the most specific pattern it matched by (for multicast).
    pub fn lookup_all(&self, name: &str) -> Vec<(InstanceId, Rc<str>)> {
        self.lookup_all_by_pattern(name, |_| false)
    }

    /// As `lookup_all`, except that the instances `per_pattern` picks (other
    /// shards' and nodes' pseudo-instances, each standing for instances
    /// there) are listed once for every matching pattern they subscribe,
    /// with that pattern: which of their instances get a copy is decided
    /// from what each pattern has there (`shards::Mirror`, the cluster's
    /// counts).
    pub fn lookup_all_by_pattern(
        &self,
        name: &str,
        per_pattern: impl Fn(InstanceId) -> bool,
    ) -> Vec<(InstanceId, Rc<str>)> {
        let mut out: Vec<(InstanceId, Rc<str>)> = Vec::new();
        let mut seen: AHashSet<InstanceId> = AHashSet::new();
        let exact = self.entries.get(name).filter(|e| !e.wild);
        let mut prepared = pattern::Name::new(name);
        let wild = self.candidates(name).into_iter().filter(|p| self.try_pattern(&mut prepared, p));
        for e in exact.into_iter().chain(wild.map(|p| &self.entries[p])) {
            // Pseudo-instances listed for this pattern already (a handful:
            // one per other shard or node).
            let mut listed_here: Vec<InstanceId> = Vec::new();
            for &i in &e.instances {
                let first = if per_pattern(i) {
                    !listed_here.contains(&i) && {
                        listed_here.push(i);
                        true
                    }
                } else {
                    seen.insert(i)
                };
                if first {
                    out.push((i, e.pattern.clone()));
                }
            }
        }
        out
    }

    /// The entry of one pattern, exactly.
    /// The instances subscribed to `pattern` (each once).
    pub fn instances_of(&self, pattern: &str) -> Vec<InstanceId> {
        let mut ids: Vec<InstanceId> = self.entries.get(pattern).map(|e| e.instances.clone()).unwrap_or_default();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    pub fn entry_mut(&mut self, pattern: &str) -> Option<&mut PatternEntry> {
        self.entries.get_mut(pattern)
    }

    /// Every pattern with its instances (for listings).
    pub fn patterns(&self) -> impl Iterator<Item = &PatternEntry> {
        self.entries.values()
    }

    /// After many subscriptions went (an instance with thousands closed):
    /// shrinks the tables and returns the heap's free pages to the system,
    /// at most once per [`TRIM_INTERVAL`]. Called when an instance is
    /// removed and on every keep-alive round (which catches a release that
    /// came too soon after the last trim). True if it trimmed.
    pub fn give_back_memory(&mut self, now: Instant) -> bool {
        if self.released < TRIM_AFTER
            || self.last_trim.is_some_and(|t| now.saturating_duration_since(t) < TRIM_INTERVAL)
        {
            return false;
        }
        self.released = 0;
        self.last_trim = Some(now);
        if self.entries.capacity() > 4 * self.entries.len().max(16) {
            self.entries.shrink_to_fit();
        }
        cumulo_sys::trim_heap();
        true
    }

    /// Wildcard patterns held (for tests and listings).
    pub fn wildcard_count(&self) -> usize {
        self.wildcards.len()
    }
}

#[cfg(test)]
mod tests;
