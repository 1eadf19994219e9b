//! The instances of one request_rate service share one schedule and one
//! recorder: together they send the configured rate, each its share, and
//! the first to start runs the tick loop and logs the reports. They find
//! each other by prefix and service name; a group is complete when all
//! `count_process` x `count_thread` instances have joined, and a later
//! instance (a second service with the same prefix and name) starts a new
//! group.

use crate::recorder::SharedRecorder;
use crate::schedule::{self, Schedule};
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};
use tokio::sync::watch;

pub struct Group {
    key: String,
    pub size: u32,
    joined: Cell<u32>,
    pub pace: watch::Sender<Schedule>,
    pub rec: SharedRecorder,
}

thread_local! {
    // Internal services all run on the core's one event-loop thread.
    static GROUPS: RefCell<Vec<Weak<Group>>> = const { RefCell::new(Vec::new()) };
}

/// Joins (or starts) the group of `key`; returns it and this instance's
/// lane, 0 being the one that leads.
pub fn join(key: &str, size: u32) -> (Rc<Group>, u32) {
    GROUPS.with(|groups| {
        let mut groups = groups.borrow_mut();
        groups.retain(|w| w.strong_count() > 0);
        for g in groups.iter().filter_map(Weak::upgrade) {
            if g.key == key && g.joined.get() < g.size {
                let lane = g.joined.get();
                g.joined.set(lane + 1);
                return (g, lane);
            }
        }
        let (pace, _) = schedule::channel();
        let g = Rc::new(Group {
            key: key.to_string(),
            size: size.max(1),
            joined: Cell::new(1),
            pace,
            rec: SharedRecorder::default(),
        });
        groups.push(Rc::downgrade(&g));
        (g, 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_of_one_service_share_a_group_of_its_size() {
        let (a, la) = join("/p/ /n", 2);
        let (b, lb) = join("/p/ /n", 2);
        let (c, lc) = join("/p/ /n", 2);
        let (d, ld) = join("/q/ /n", 1);
        assert!(Rc::ptr_eq(&a, &b));
        assert!(!Rc::ptr_eq(&a, &c) && !Rc::ptr_eq(&a, &d));
        assert_eq!((la, lb, lc, ld), (0, 1, 0, 0));
    }
}
