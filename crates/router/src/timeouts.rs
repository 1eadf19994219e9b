//! The deadlines of the requests in flight, in the order they fall due.
//!
//! Written here rather than taken from tokio-util's `DelayQueue`: that is a
//! timer wheel with a slab, and every request paid an insert and a remove in
//! it (a slab slot, linked-list updates in its wheel level): about 5% of the
//! core's samples in the routing profile (docs/benchmarks/core.md, "Where case (c)
//! spends its time"). Here, arming a deadline is a push at the back of a
//! FIFO and an answer costs nothing at all: entries are lazy. An entry only
//! names a request and a time; when the time comes, the request expires if
//! it is still in flight and its own deadline has passed (`Core::expire_due`),
//! so an entry left behind by an answered request, or by a forward that
//! shortened the deadline, is skipped.
//!
//! Most requests of a core carry the same timeout, so their deadlines come in
//! order: they go to the FIFO. A deadline earlier than the FIFO's last one
//! (a shorter timeout, a forward) goes to a heap beside it.
//!
//! Bounded: left-behind entries are swept out (`retain`) once the entries
//! outnumber twice the requests in flight plus `SLACK` when one more is
//! armed: the table never holds more than that for the most requests in
//! flight at once, and a sweep's checks are paid for by the arms since the
//! last one (a few per request, amortised).

use cumulo_proto::TransId;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;
use std::time::Instant;
use tokio::sync::Notify;

/// Entries kept beyond twice the requests in flight before a sweep: large
/// enough that sweeps are rare at any rate, small enough (32 bytes an entry,
/// 256 KiB) to stay in cache.
pub const SLACK: usize = 8192;

type Entry = (Instant, TransId);

pub struct Timeouts {
    in_order: VecDeque<Entry>,
    out_of_order: BinaryHeap<Reverse<Entry>>,
    /// When the timer task is to wake next; None while it waits to be told.
    wakes_at: Option<Instant>,
    /// Tells the timer task a deadline earlier than `wakes_at` was armed.
    pub wake: Rc<Notify>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            in_order: VecDeque::new(),
            out_of_order: BinaryHeap::new(),
            wakes_at: None,
            wake: Rc::new(Notify::new()),
        }
    }
}

impl Timeouts {
    /// Entries held, live and left behind.
    pub fn len(&self) -> usize {
        self.in_order.len() + self.out_of_order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the entries outnumber what `in_flight` requests justify.
    pub fn needs_sweep(&self, in_flight: usize) -> bool {
        self.len() > 2 * in_flight + SLACK
    }

    /// Arms `deadline` for `tid`; wakes the timer task if it would sleep
    /// past it.
    pub fn arm(&mut self, tid: TransId, deadline: Instant) {
        match self.in_order.back() {
            Some((last, _)) if deadline < *last => self.out_of_order.push(Reverse((deadline, tid))),
            _ => self.in_order.push_back((deadline, tid)),
        }
        if self.wakes_at.is_none_or(|w| deadline < w) {
            self.wakes_at = Some(deadline);
            self.wake.notify_one();
        }
    }

    /// Keeps only the entries `live` says still stand.
    pub fn retain(&mut self, mut live: impl FnMut(Instant, &TransId) -> bool) {
        self.in_order.retain(|(at, tid)| live(*at, tid));
        let mut heap = std::mem::take(&mut self.out_of_order).into_vec();
        heap.retain(|Reverse((at, tid))| live(*at, tid));
        heap.shrink_to(2 * heap.len() + SLACK);
        self.out_of_order = BinaryHeap::from(heap);
        // After a burst, give the memory back (a shrink is a copy: rare).
        self.in_order.shrink_to(2 * self.in_order.len() + SLACK);
    }

    /// The earliest entry, if it falls due by `now`, taken out.
    pub fn pop_due(&mut self, now: Instant) -> Option<Entry> {
        let fifo = self.in_order.front().map(|e| e.0);
        let heap = self.out_of_order.peek().map(|Reverse(e)| e.0);
        match (fifo, heap) {
            (Some(f), h) if f <= now && h.is_none_or(|h| f <= h) => self.in_order.pop_front(),
            (_, Some(h)) if h <= now => self.out_of_order.pop().map(|Reverse(e)| e),
            _ => None,
        }
    }

    /// The earliest deadline held; the timer task sleeps until then.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        let fifo = self.in_order.front().map(|e| e.0);
        let heap = self.out_of_order.peek().map(|Reverse(e)| e.0);
        let next = match (fifo, heap) {
            (Some(f), Some(h)) => Some(f.min(h)),
            (f, h) => f.or(h),
        };
        self.wakes_at = next;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn tid(n: u8) -> TransId {
        TransId([n; 16])
    }

    #[test]
    fn deadlines_fall_due_in_time_order_whatever_the_arming_order() {
        let t0 = Instant::now();
        let mut t = Timeouts::default();
        for (n, ms) in [(1, 50), (2, 70), (3, 20), (4, 90), (5, 60), (6, 90)] {
            t.arm(tid(n), t0 + Duration::from_millis(ms));
        }
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(20)));
        let mut order = Vec::new();
        while let Some((at, id)) = t.pop_due(t0 + Duration::from_millis(80)) {
            order.push((at - t0, id.0[0]));
        }
        let ms = |m| Duration::from_millis(m);
        assert_eq!(order, vec![(ms(20), 3), (ms(50), 1), (ms(60), 5), (ms(70), 2)]);
        assert_eq!(t.len(), 2, "the two entries due at 90 ms are still held");
        assert_eq!(t.next_deadline(), Some(t0 + ms(90)));
    }

    #[test]
    fn the_timer_task_is_woken_only_for_an_earlier_deadline() {
        let t0 = Instant::now();
        let mut t = Timeouts::default();
        t.arm(tid(1), t0 + Duration::from_millis(100));
        assert_eq!(t.wakes_at, Some(t0 + Duration::from_millis(100)));
        t.arm(tid(2), t0 + Duration::from_millis(200));
        assert_eq!(t.wakes_at, Some(t0 + Duration::from_millis(100)), "a later deadline leaves the task asleep");
        t.arm(tid(3), t0 + Duration::from_millis(10));
        assert_eq!(t.wakes_at, Some(t0 + Duration::from_millis(10)), "an earlier one wakes it");
    }

    #[test]
    fn a_sweep_keeps_only_what_still_stands() {
        let t0 = Instant::now();
        let mut t = Timeouts::default();
        for n in 0..100u8 {
            t.arm(tid(n), t0 + Duration::from_millis(1000 - n as u64));
        }
        assert!(!t.needs_sweep(0) && t.len() == 100);
        t.retain(|_, id| id.0[0] % 10 == 0);
        assert_eq!(t.len(), 10);
        let mut due = Vec::new();
        while let Some((_, id)) = t.pop_due(t0 + Duration::from_secs(2)) {
            due.push(id.0[0]);
        }
        assert_eq!(due, vec![90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);
    }
}
