//! Which policy covers a name: of every destination pattern that matches
//! it, the most specific (an exact name; then the longest literal part;
//! then the fewest wildcards; then the policy listed first). The answer is
//! remembered per name, so the hot path pays one hash lookup.

use crate::policy::Policy;
use ahash::AHashMap;
use cumulo_config::policy::PolicyConfig;
use std::rc::Rc;

/// Names whose policy is remembered, at most; past it the memory starts
/// over (a sender making up names costs a scan of the destinations each,
/// never unbounded memory).
pub const MAX_CACHED_NAMES: usize = 8192;

#[derive(Debug, Default)]
pub struct Policies {
    list: Vec<Rc<Policy>>,
    /// (pattern, policy index), most specific first.
    destinations: Vec<(String, u32)>,
    cache: AHashMap<Box<str>, Option<u32>>,
}

impl Policies {
    /// The policies of checked `[[policy]]` tables, in their order.
    pub fn new(configs: &[PolicyConfig]) -> Policies {
        let list: Vec<Rc<Policy>> =
            configs.iter().enumerate().map(|(i, c)| Rc::new(Policy::new(i as u32, c))).collect();
        let mut destinations: Vec<(String, u32)> = configs
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.destinations.iter().map(move |d| (d.clone(), i as u32)))
            .collect();
        // Stable: among equals, the policy listed first.
        destinations.sort_by_key(|(p, _)| {
            let wild = cumulo_pattern::has_wildcard(p);
            (wild, std::cmp::Reverse(cumulo_pattern::literal_len(p)), cumulo_pattern::wildcard_count(p))
        });
        Policies { list, destinations, cache: AHashMap::new() }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn list(&self) -> &[Rc<Policy>] {
        &self.list
    }

    pub fn get(&self, index: u32) -> Option<&Rc<Policy>> {
        self.list.get(index as usize)
    }

    pub fn configs(&self) -> Vec<PolicyConfig> {
        self.list.iter().map(|p| p.config.clone()).collect()
    }

    /// The policy that covers `name`, if any.
    #[inline]
    pub fn for_name(&mut self, name: &str) -> Option<&Rc<Policy>> {
        let index = match self.cache.get(name) {
            Some(hit) => *hit,
            None => self.find(name),
        };
        index.and_then(|i| self.list.get(i as usize))
    }

    #[cold]
    fn find(&mut self, name: &str) -> Option<u32> {
        let found = self
            .destinations
            .iter()
            .find(|(p, _)| if cumulo_pattern::has_wildcard(p) { cumulo_pattern::matches(p, name) } else { p == name })
            .map(|(_, i)| *i);
        if self.cache.len() >= MAX_CACHED_NAMES {
            self.cache.clear();
        }
        self.cache.insert(name.into(), found);
        found
    }
}

#[cfg(test)]
impl Policies {
    pub(crate) fn cache_len(&self) -> usize {
        self.cache.len()
    }
}
