//! Wildcard patterns indexed by their literal prefix (what comes before the
//! first wildcard), in a radix trie: the patterns whose prefix starts a name
//! are found in one walk along the name, O(name + patterns found), however
//! many patterns there are. A pattern whose prefix does not start the name
//! cannot match it, so it is never tried.
//!
//! Written by hand: the trie needs only insert, remove and "every key that
//! is a prefix of this name", a few dozen lines, where the radix-trie crates
//! bring APIs for ordered maps this does not use.

use ahash::AHashMap;
use std::rc::Rc;

/// What a lookup needs to know of a pattern before running the matcher.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Literal characters: the specificity order's first key.
    pub literal_len: usize,
    /// Bytes of the literal suffix (after the last wildcard).
    pub suffix_len: usize,
    /// Shortest name it can match: its literal characters plus one per
    /// wildcard.
    pub min_name: usize,
}

#[derive(Debug, Default)]
pub struct PrefixIndex {
    root: Node,
    len: usize,
}

#[derive(Debug, Default)]
struct Node {
    /// The bytes on the edge from the parent (empty only at the root).
    label: Box<[u8]>,
    /// Patterns whose literal prefix ends exactly here.
    here: AHashMap<Rc<str>, Shape>,
    /// Sorted by the first byte of their label, which is unique.
    children: Vec<Node>,
}

impl Node {
    fn leaf(label: &[u8]) -> Node {
        Node { label: label.into(), ..Node::default() }
    }

    fn child(&self, b: u8) -> Result<usize, usize> {
        self.children.binary_search_by_key(&b, |c| c.label[0])
    }
}

fn common_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl PrefixIndex {
    /// Patterns held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn insert(&mut self, prefix: &[u8], pattern: Rc<str>, shape: Shape) {
        let mut node = &mut self.root;
        let mut key = prefix;
        while !key.is_empty() {
            match node.child(key[0]) {
                Err(i) => {
                    node.children.insert(i, Node::leaf(key));
                    node = &mut node.children[i];
                    break;
                }
                Ok(i) => {
                    let child = &mut node.children[i];
                    let common = common_len(&child.label, key);
                    if common < child.label.len() {
                        // Split the edge where the new key leaves it.
                        let mut lower = std::mem::replace(child, Node::leaf(&key[..common]));
                        lower.label = lower.label[common..].into();
                        child.children.push(lower);
                    }
                    key = &key[common..];
                    node = child;
                }
            }
        }
        if node.here.insert(pattern, shape).is_none() {
            self.len += 1;
        }
    }

    /// Removes a pattern; false if it was not there. Nodes left empty go,
    /// and a node left with one child and no pattern merges with it, so the
    /// trie's size follows the patterns it holds.
    pub fn remove(&mut self, prefix: &[u8], pattern: &str) -> bool {
        let removed = remove_at(&mut self.root, prefix, pattern);
        if removed {
            self.len -= 1;
            if self.len == 0 {
                self.root = Node::default();
            }
        }
        removed
    }

    /// Calls `each` with every pattern whose literal prefix starts `name`.
    pub fn candidates<'a>(&'a self, name: &[u8], mut each: impl FnMut(&'a Rc<str>, &'a Shape)) {
        let mut node = &self.root;
        let mut rest = name;
        loop {
            node.here.iter().for_each(|(p, s)| each(p, s));
            let Some(&b) = rest.first() else { return };
            let Ok(i) = node.child(b) else { return };
            node = &node.children[i];
            let Some(after) = rest.strip_prefix(&*node.label) else { return };
            rest = after;
        }
    }
}

/// Recursive: the depth is the count of branching nodes along one prefix,
/// at most its length (`core.max_pattern`), a few hundred KB of stack at
/// worst.
fn remove_at(node: &mut Node, key: &[u8], pattern: &str) -> bool {
    if key.is_empty() {
        let removed = node.here.remove(pattern).is_some();
        if removed && node.here.is_empty() {
            node.here = AHashMap::new();
        }
        return removed;
    }
    let Ok(i) = node.child(key[0]) else { return false };
    let child = &mut node.children[i];
    let Some(rest) = key.strip_prefix(&*child.label) else { return false };
    if !remove_at(child, rest, pattern) {
        return false;
    }
    if child.here.is_empty() {
        match child.children.len() {
            0 => {
                node.children.remove(i);
                if node.children.is_empty() {
                    node.children = Vec::new();
                }
            }
            1 => {
                let only = child.children.pop().unwrap();
                let label = [&*child.label, &*only.label].concat();
                *child = Node { label: label.into(), ..only };
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape { literal_len: 0, suffix_len: 0, min_name: 0 }
    }

    fn found(ix: &PrefixIndex, name: &str) -> Vec<String> {
        let mut v = Vec::new();
        ix.candidates(name.as_bytes(), |p, _| v.push(p.to_string()));
        v.sort();
        v
    }

    #[test]
    fn finds_exactly_the_patterns_whose_prefix_starts_the_name() {
        let mut ix = PrefixIndex::default();
        let pats = ["*", "/a/*", "/a/b*", "/a/bc/*", "/ab*", "/a/?/x", "/b/*", "/a/bc/*x"];
        for p in pats {
            ix.insert(crate::literal_prefix(p).as_bytes(), Rc::from(p), shape());
        }
        assert_eq!(ix.len(), pats.len());
        assert_eq!(found(&ix, "/a/bc/d"), ["*", "/a/*", "/a/?/x", "/a/b*", "/a/bc/*", "/a/bc/*x"]);
        assert_eq!(found(&ix, "/a/"), ["*", "/a/*", "/a/?/x"]);
        assert_eq!(found(&ix, "/abc"), ["*", "/ab*"]);
        assert_eq!(found(&ix, "/c"), ["*"]);
        for p in pats {
            assert!(ix.remove(crate::literal_prefix(p).as_bytes(), p), "{p}");
            assert!(!ix.remove(crate::literal_prefix(p).as_bytes(), p), "{p} twice");
            assert!(!found(&ix, "/a/bc/dx").contains(&p.to_string()));
        }
        assert_eq!(ix.len(), 0);
        assert!(ix.root.children.is_empty());
    }

    #[test]
    fn agrees_with_a_scan_of_every_pattern_through_random_changes() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut ix = PrefixIndex::default();
        let mut all: Vec<String> = Vec::new();
        let word =
            |rng: &mut fastrand::Rng| (0..rng.usize(0..6)).map(|_| ['a', 'b', '/'][rng.usize(..3)]).collect::<String>();
        for _ in 0..20_000 {
            if all.is_empty() || rng.u8(..3) > 0 {
                let p = format!("{}*", word(&mut rng));
                if !all.contains(&p) {
                    ix.insert(crate::literal_prefix(&p).as_bytes(), Rc::from(p.as_str()), shape());
                    all.push(p);
                }
            } else {
                let p = all.swap_remove(rng.usize(..all.len()));
                assert!(ix.remove(crate::literal_prefix(&p).as_bytes(), &p));
            }
            let name = word(&mut rng);
            let mut want: Vec<String> =
                all.iter().filter(|p| name.starts_with(crate::literal_prefix(p))).cloned().collect();
            want.sort();
            assert_eq!(found(&ix, &name), want, "name {name:?}");
        }
    }
}
