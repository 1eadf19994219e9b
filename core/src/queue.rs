//! A per-instance request queue in priority order (lower value first, FIFO
//! within a priority). Almost all traffic uses one priority, so levels are a
//! short sorted vector of FIFOs rather than a heap: push and pop are O(1)
//! for the common case and never reorder equal priorities.

use std::collections::VecDeque;

#[derive(Debug)]
pub struct PriorityQueue<T> {
    levels: Vec<(i8, VecDeque<T>)>,
    len: usize,
}

impl<T> Default for PriorityQueue<T> {
    fn default() -> Self {
        PriorityQueue { levels: Vec::new(), len: 0 }
    }
}

impl<T> PriorityQueue<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, priority: i8, item: T) {
        let at = match self.levels.binary_search_by_key(&priority, |(p, _)| *p) {
            Ok(i) => i,
            Err(i) => {
                self.levels.insert(i, (priority, VecDeque::new()));
                i
            }
        };
        self.levels[at].1.push_back(item);
        self.len += 1;
    }

    pub fn pop(&mut self) -> Option<T> {
        let first = self.levels.first_mut()?;
        let item = first.1.pop_front();
        if first.1.is_empty() {
            self.levels.remove(0);
        }
        if item.is_some() {
            self.len -= 1;
        }
        item
    }

    /// Removes the first item matching `pred` (a linear scan: used only when
    /// a queued request times out, so the queue never holds dead requests).
    pub fn remove_first(&mut self, mut pred: impl FnMut(&T) -> bool) -> Option<T> {
        for li in 0..self.levels.len() {
            if let Some(i) = self.levels[li].1.iter().position(&mut pred) {
                let item = self.levels[li].1.remove(i);
                if self.levels[li].1.is_empty() {
                    self.levels.remove(li);
                }
                self.len -= 1;
                return item;
            }
        }
        None
    }

    /// Takes everything out, most urgent first.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.len = 0;
        self.levels.drain(..).flat_map(|(_, q)| q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_priority_value_first_fifo_within() {
        let mut q = PriorityQueue::default();
        for (p, v) in [(0, "a"), (5, "x"), (-3, "u"), (0, "b"), (-3, "v"), (127, "z"), (-128, "first")] {
            q.push(p, v);
        }
        assert_eq!(q.len(), 7);
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, ["first", "u", "v", "a", "b", "x", "z"]);
        assert!(q.is_empty());
    }

    #[test]
    fn remove_first_keeps_order_and_length() {
        let mut q = PriorityQueue::default();
        for (p, v) in [(0, 1), (0, 2), (-1, 3), (0, 4)] {
            q.push(p, v);
        }
        assert_eq!(q.remove_first(|&v| v == 3), Some(3));
        assert_eq!(q.remove_first(|&v| v == 2), Some(2));
        assert_eq!(q.remove_first(|&v| v == 9), None);
        assert_eq!(q.len(), 2);
        assert_eq!(std::iter::from_fn(|| q.pop()).collect::<Vec<_>>(), [1, 4]);
    }
}
