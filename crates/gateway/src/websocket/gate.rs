//! A branch of the session's `select!` polled only once it has been woken.
//!
//! The session's task is woken by many things (a push, a call's answer, the
//! writer, a timer), and `select!` polls every branch on each wake-up. For
//! the socket's read side that was a read attempt per push, with tungstenite
//! zeroing its 4 KiB read chunk before it, and a lock in the cancellation
//! token: together about a tenth of the core's CPU per copy of a multicast
//! to 10,000 connections (`bench/profile fanout --record`). What seldom
//! happens (a stop, a close, an overflow, the idle and ping timers) shares
//! one gate: a write that holds for the answers of calls in flight polls
//! the task once per round of the event loop. (A gate each cost a
//! multicast's copy more than it saved: one more cold allocation touched
//! per wake-up at 10,000 connections.) A gate gives its
//! branch a waker of its own that marks it woken and wakes the task, as
//! futures' `FuturesUnordered` does for its members; no library offers it
//! for one branch of a `select!`.

use futures_util::task::AtomicWaker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

pub struct Gate {
    flag: Arc<Flag>,
    waker: Waker,
}

impl Gate {
    /// Open for the first poll.
    pub fn new() -> Gate {
        let flag = Arc::new(Flag { woken: AtomicBool::new(true), task: AtomicWaker::new() });
        let waker = Waker::from(flag.clone());
        Gate { flag, waker }
    }

    /// Polls `inner` (with the gate's waker) if it was woken since it last
    /// returned `Pending`; else `Pending` at once. After `Ready` it is
    /// polled again next time: a stream may hold more items already read.
    pub fn poll<T>(&self, cx: &mut Context<'_>, inner: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        self.flag.task.register(cx.waker());
        if !self.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let r = inner(&mut Context::from_waker(&self.waker));
        if r.is_ready() {
            self.flag.woken.store(true, Ordering::Release);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::future::poll_fn;

    #[test]
    fn the_inner_is_polled_first_then_only_after_its_waker_fired() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let gate = Gate::new();
            let polls = Cell::new(0);
            let stored: Cell<Option<Waker>> = Cell::new(None);
            let step = || {
                poll_fn(|cx| {
                    let r = gate.poll(cx, |inner| {
                        polls.set(polls.get() + 1);
                        stored.set(Some(inner.waker().clone()));
                        Poll::<()>::Pending
                    });
                    Poll::Ready(r.is_pending())
                })
            };
            assert!(step().await);
            assert_eq!(polls.get(), 1, "polled on the first poll");
            assert!(step().await);
            assert_eq!(polls.get(), 1, "not polled again before its waker fires");
            stored.take().unwrap().wake();
            assert!(step().await);
            assert_eq!(polls.get(), 2, "polled again once woken");
        });
    }
}
