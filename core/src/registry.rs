//! The registry of subscriptions: which instances serve which patterns, and
//! which pattern a name resolves to.
//!
//! Exact patterns are one hash lookup. Wildcard patterns are kept sorted from
//! most to least specific; a name's best wildcard match is computed once and
//! cached until the set of wildcard patterns changes, so steady traffic costs
//! one or two hash lookups per request whatever the number of patterns.

use crate::pattern;
use ahash::AHashMap;
use std::rc::Rc;

pub type InstanceId = u32;

/// Names remembered per generation of the wildcard set; past this the cache
/// is cleared, so a sender cycling through unique names cannot grow it
/// without bound.
const CACHE_LIMIT: usize = 65_536;

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
}

#[derive(Debug, Default)]
pub struct Registry {
    entries: AHashMap<Rc<str>, PatternEntry>,
    /// Wildcard patterns, most specific first.
    wildcards: Vec<Rc<str>>,
    cache: AHashMap<Box<str>, Option<Rc<str>>>,
}

impl Registry {
    /// Adds one subscription of `instance` to the full `pattern` (already
    /// validated). Returns the shared pattern string.
    pub fn subscribe(&mut self, full: &str, instance: InstanceId) -> Rc<str> {
        if let Some(e) = self.entries.get_mut(full) {
            e.instances.push(instance);
            return e.pattern.clone();
        }
        let key: Rc<str> = Rc::from(full);
        let literal_len = pattern::literal_len(full);
        let wild = pattern::has_wildcard(full);
        self.entries.insert(
            key.clone(),
            PatternEntry { pattern: key.clone(), instances: vec![instance], literal_len, wild, next: 0 },
        );
        if wild {
            let entries = &self.entries;
            let pos = self
                .wildcards
                .partition_point(|p| more_specific(entries[p].literal_len, p, literal_len, full));
            self.wildcards.insert(pos, key.clone());
            self.cache.clear();
        }
        key
    }

    /// Removes one subscription; false if there was none.
    pub fn unsubscribe(&mut self, full: &str, instance: InstanceId) -> bool {
        let Some(e) = self.entries.get_mut(full) else { return false };
        let Some(i) = e.instances.iter().position(|&x| x == instance) else { return false };
        e.instances.remove(i);
        if e.instances.is_empty() {
            self.entries.remove(full);
            if let Some(w) = self.wildcards.iter().position(|p| &**p == full) {
                self.wildcards.remove(w);
                self.cache.clear();
            }
        }
        true
    }

    /// How many times `instance` subscribed `full`.
    pub fn count(&self, full: &str, instance: InstanceId) -> u32 {
        self.entries.get(full).map_or(0, |e| e.instances.iter().filter(|&&x| x == instance).count() as u32)
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
                let found = self.wildcards.iter().find(|p| pattern::matches(p, name)).cloned();
                if self.cache.len() >= CACHE_LIMIT {
                    self.cache.clear();
                }
                self.cache.insert(name.into(), found.clone());
                found
            }
        };
        best.and_then(move |p| self.entries.get_mut(&*p))
    }

    /// Every instance subscribed to any pattern matching `name`, each once,
    /// with the most specific pattern it matched by (for multicast).
    pub fn lookup_all(&self, name: &str) -> Vec<(InstanceId, Rc<str>)> {
        let mut out: Vec<(InstanceId, Rc<str>)> = Vec::new();
        let exact = self.entries.get(name).filter(|e| !e.wild);
        let wild = self.wildcards.iter().filter(|p| pattern::matches(p, name)).map(|p| &self.entries[p]);
        for e in exact.into_iter().chain(wild) {
            for &i in &e.instances {
                if !out.iter().any(|(x, _)| *x == i) {
                    out.push((i, e.pattern.clone()));
                }
            }
        }
        out
    }

    /// Every pattern with its instances (for listings).
    pub fn patterns(&self) -> impl Iterator<Item = &PatternEntry> {
        self.entries.values()
    }
}

/// Order of wildcard patterns: more literal characters first, then
/// lexicographic.
fn more_specific(a_len: usize, a: &str, b_len: usize, b: &str) -> bool {
    a_len > b_len || (a_len == b_len && a < b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_beats_wildcards_and_most_literal_wildcard_wins() {
        let mut r = Registry::default();
        r.subscribe("/a/*", 1);
        r.subscribe("/a/b/*", 2);
        r.subscribe("/a/b/c", 3);
        assert_eq!(r.lookup("/a/b/c").unwrap().instances, vec![3]);
        assert_eq!(r.lookup("/a/b/d").unwrap().instances, vec![2]);
        assert_eq!(r.lookup("/a/x").unwrap().instances, vec![1]);
        assert!(r.lookup("/b").is_none());
        // cached answers follow registry changes
        assert!(r.unsubscribe("/a/b/*", 2));
        assert_eq!(r.lookup("/a/b/d").unwrap().instances, vec![1]);
    }

    #[test]
    fn counts_and_multicast() {
        let mut r = Registry::default();
        r.subscribe("/m/x", 1);
        r.subscribe("/m/x", 1);
        r.subscribe("/m/*", 2);
        r.subscribe("/m/*", 1);
        assert_eq!(r.count("/m/x", 1), 2);
        let all = r.lookup_all("/m/x");
        assert_eq!(all.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(&*all[0].1, "/m/x");
        assert!(r.unsubscribe("/m/x", 1));
        assert_eq!(r.count("/m/x", 1), 1);
        assert!(!r.unsubscribe("/m/y", 1));
    }
}
