//! Messages waiting to be written to one browser, bounded in bytes. Pushes
//! and answers are appended here and the connection's writer drains them:
//! a browser that does not read fills it, and past `max_pending` bytes the
//! connection is cut off (a slow reader never makes the core buffer more,
//! and never slows the other connections).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use tokio::sync::Notify;
use tokio_tungstenite::tungstenite::Message;

pub struct Outgoing {
    queue: RefCell<VecDeque<Message>>,
    bytes: Cell<usize>,
    max: usize,
    overflowed: Cell<bool>,
    wake: Notify,
    /// Woken once when the queue overflows.
    cut: Notify,
    /// Calls in flight on the connection, whose answers will be queued
    /// here: the writer holds a write briefly for them (session.rs).
    pub expecting: Cell<usize>,
}

impl Outgoing {
    pub fn new(max: usize) -> Outgoing {
        Outgoing {
            queue: RefCell::default(),
            bytes: Cell::new(0),
            max,
            overflowed: Cell::new(false),
            wake: Notify::new(),
            cut: Notify::new(),
            expecting: Cell::new(0),
        }
    }

    /// Queues a message; false (and the queue refuses everything from then
    /// on) when it would take the bytes waiting over the limit.
    pub fn push(&self, m: Message) -> bool {
        if self.overflowed.get() {
            return false;
        }
        let len = m.len();
        if self.bytes.get() + len > self.max {
            self.overflowed.set(true);
            self.wake.notify_one();
            self.cut.notify_one();
            return false;
        }
        self.bytes.set(self.bytes.get() + len);
        self.queue.borrow_mut().push_back(m);
        self.wake.notify_one();
        true
    }

    /// Resolves once the queue overflowed: the browser is not reading, and
    /// the writer may be stuck on its full socket.
    pub async fn overflowed(&self) {
        while !self.overflowed.get() {
            self.cut.notified().await;
        }
    }

    /// The next message to write, once there is one; `None` once the queue
    /// overflowed (the connection is being cut off).
    pub async fn next(&self) -> Option<Message> {
        loop {
            if self.overflowed.get() {
                return None;
            }
            if let Some(m) = self.queue.borrow_mut().pop_front() {
                self.bytes.set(self.bytes.get() - m.len());
                return Some(m);
            }
            self.wake.notified().await;
        }
    }

    /// A message already waiting (to batch writes before one flush).
    pub fn try_next(&self) -> Option<Message> {
        if self.overflowed.get() {
            return None;
        }
        let m = self.queue.borrow_mut().pop_front()?;
        self.bytes.set(self.bytes.get() - m.len());
        Some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_bytes() {
        let q = Outgoing::new(10);
        assert!(q.push(Message::text("12345")));
        assert!(q.push(Message::binary(vec![0u8; 5])));
        assert!(!q.push(Message::text("x")));
        assert!(q.try_next().is_none() && !q.push(Message::text("")));
    }

    #[test]
    fn drained_bytes_make_room() {
        let q = Outgoing::new(10);
        assert!(q.push(Message::text("1234567890")));
        assert_eq!(q.try_next(), Some(Message::text("1234567890")));
        assert!(q.push(Message::text("abcdefghij")));
    }
}
