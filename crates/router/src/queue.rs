//! A per-instance request queue in priority order (lower value first, FIFO
//! within a priority), that also counts the bytes it holds. Each item gets a
//! key when pushed, by which it can be taken out again at once: a request
//! that times out, or whose sender went away, leaves its queue without a
//! scan. An ordered map keyed by (priority, arrival) does all three in
//! O(log n); a queue holds at most `queue_limit` items.

use std::collections::BTreeMap;

/// Where an item sits in its queue: its priority, then its arrival number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueKey {
    priority: i8,
    seq: u64,
}

#[derive(Debug)]
pub struct PriorityQueue<T> {
    items: BTreeMap<QueueKey, (usize, T)>,
    next_seq: u64,
    bytes: usize,
}

impl<T> Default for PriorityQueue<T> {
    fn default() -> Self {
        PriorityQueue { items: BTreeMap::new(), next_seq: 0, bytes: 0 }
    }
}

impl<T> PriorityQueue<T> {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// What the items weigh together, as given to `push`.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds an item weighing `bytes`; returns the key that can remove it.
    pub fn push(&mut self, priority: i8, item: T, bytes: usize) -> QueueKey {
        let key = QueueKey { priority, seq: self.next_seq };
        self.next_seq += 1;
        self.bytes += bytes;
        self.items.insert(key, (bytes, item));
        key
    }

    /// The most urgent item.
    pub fn pop(&mut self) -> Option<T> {
        let (_, (bytes, item)) = self.items.pop_first()?;
        self.bytes -= bytes;
        Some(item)
    }

    /// Takes out the item pushed under `key`, if it is still there.
    pub fn remove(&mut self, key: QueueKey) -> Option<T> {
        let (bytes, item) = self.items.remove(&key)?;
        self.bytes -= bytes;
        Some(item)
    }

    /// Takes everything out, most urgent first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> {
        self.bytes = 0;
        std::mem::take(&mut self.items).into_values().map(|(_, item)| item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_priority_value_first_fifo_within() {
        let mut q = PriorityQueue::default();
        for (p, v) in [(0, "a"), (5, "x"), (-3, "u"), (0, "b"), (-3, "v"), (127, "z"), (-128, "first")] {
            q.push(p, v, 1);
        }
        assert_eq!(q.len(), 7);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["first", "u", "v", "a", "b", "x", "z"]);
        assert!(q.is_empty());
    }

    #[test]
    fn remove_by_key_keeps_order_length_and_bytes() {
        let mut q = PriorityQueue::default();
        let keys: Vec<_> = [(0, 1), (0, 2), (-1, 3), (0, 4)].iter().map(|&(p, v)| q.push(p, v, v * 10)).collect();
        assert_eq!(q.bytes(), 100);
        assert_eq!(q.remove(keys[2]), Some(3));
        assert_eq!(q.remove(keys[1]), Some(2));
        assert_eq!(q.remove(keys[1]), None, "a key removes once");
        assert_eq!((q.len(), q.bytes()), (2, 50));
        assert_eq!(std::iter::from_fn(|| q.pop()).collect::<Vec<_>>(), [1, 4]);
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn drain_empties_and_forgets_the_bytes() {
        let mut q = PriorityQueue::default();
        q.push(1, "b", 7);
        q.push(0, "a", 5);
        assert_eq!(q.drain().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!((q.len(), q.bytes()), (0, 0));
    }
}
