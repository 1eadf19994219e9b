//! The two deadlines of one gateway connection, kept without a timer per
//! request:
//! - the head: from when the connection starts waiting for a request head
//!   (accepted, or the last byte of its previous response written) it has
//!   `header_timeout_ms` to send a whole one, else it is closed (slowloris,
//!   and the idle keep-alive time);
//! - the answer: a request in the gateway's hands is answered (504 at worst)
//!   within `timeout_ms` plus a safety margin, even if the core failed to
//!   answer it by its own deadline.
//!
//! Arming and clearing a timer per request (hyper's header-read timer, a
//! tokio `timeout` around each call) costs timer-wheel inserts and removals
//! that touch the entries of other, cold connections: with 20,000
//! connections that was a large share of the core's CPU per request. Here
//! a request only stores the time in an atomic, and one `Sleep` per
//! connection, woken at most once per timeout, reads the real deadline and
//! either acts on it or moves on to it (a lazy timer).
//!
//! The same state tells when the connection is idle (no request served,
//! its last response written) so that it can be parked without hyper's
//! buffers (park.rs), once it has stayed idle for `Timeouts::park_after`
//! (the listener's `IdleConnections` tells it when).

use super::park::IdleConnections;
use futures_util::task::AtomicWaker;
use hyper::body::{Body, Frame, SizeHint};
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// In `Deadlines::since`: a request is being served (else the connection
/// waits for a head). The other bits: nanoseconds since `Deadlines::epoch`.
const SERVING: u64 = 1 << 63;

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// A whole request head, counted from when the connection waits for it.
    pub head: Duration,
    /// An answer, counted from the request's head.
    pub answer: Duration,
    /// Idle this long after a response, a connection is parked (park.rs);
    /// zero parks it as soon as its response is written.
    pub park_after: Duration,
}

/// Shared by the connection's task, its requests and its socket wrapper
/// (`Stamped`, which hyper may move into an upgrade, hence atomics).
pub struct Deadlines {
    timeouts: Timeouts,
    epoch: Instant,
    /// When the current phase began, and which phase (`SERVING`).
    since: AtomicU64,
    /// The request being served is past its answer deadline.
    overdue: AtomicBool,
    /// The request waiting on `overdue`.
    waiter: AtomicWaker,
    /// A write returned Pending and none has gone through since.
    write_pending: AtomicBool,
    /// A request was served since the connection was last parked.
    served: AtomicBool,
    /// The connection waits in its listener's `IdleConnections`.
    queued: AtomicBool,
    /// `IdleConnections` found it idle for `park_after`: park it.
    park_now: AtomicBool,
    /// A request has been answered on this connection (ever).
    answered: AtomicBool,
    /// The request being served (or the last) came within `park_after` of
    /// the previous response: a busy client, likely to send the next soon.
    /// A connection's first request is never quick: a burst of new
    /// connections must not each keep hyper's buffers.
    quick: AtomicBool,
}

/// What `Deadlines::next` saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// No whole head within the head timeout: close the connection.
    HeadExpired,
    /// Idle with its response written: it may be parked.
    Idle,
}

impl Deadlines {
    /// A new connection: waiting for its first head from now.
    pub fn new(timeouts: Timeouts) -> Arc<Deadlines> {
        Arc::new(Deadlines {
            timeouts,
            epoch: Instant::now(),
            since: AtomicU64::new(0),
            overdue: AtomicBool::new(false),
            waiter: AtomicWaker::new(),
            write_pending: AtomicBool::new(false),
            served: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            park_now: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            quick: AtomicBool::new(false),
        })
    }

    fn elapsed(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(SERVING - 1).min(SERVING - 1)
    }

    fn at(&self, nanos: u64) -> Instant {
        self.epoch + Duration::from_nanos(nanos & !SERVING)
    }

    /// A request head arrived: the answer deadline runs until the returned
    /// guard is dropped (with the response body, `Guarded`, or with the
    /// request); then the connection waits for its next head.
    pub fn serving(self: &Arc<Self>) -> Serving {
        self.overdue.store(false, Relaxed);
        let (now, waited) = (self.elapsed(Instant::now()), self.since.load(Relaxed));
        let quick = waited & SERVING == 0
            && self.answered.load(Relaxed)
            && now.saturating_sub(waited) < self.timeouts.park_after.as_nanos() as u64;
        self.quick.store(quick, Relaxed);
        self.since.store(now | SERVING, Relaxed);
        Serving(self.clone())
    }

    /// The answer time of the request being served starts again now.
    pub fn answer_from_now(&self) {
        self.since.store(self.elapsed(Instant::now()) | SERVING, Relaxed);
    }

    /// Notes whether a write is left waiting for the socket.
    fn track<T>(&self, p: Poll<T>) -> Poll<T> {
        self.write_pending.store(p.is_pending(), Relaxed);
        p
    }

    /// Bytes went out while no request is served: the previous response is
    /// still being written, so the wait for the next head starts later.
    fn wrote(&self) {
        if self.since.load(Relaxed) & SERVING == 0 {
            self.since.store(self.elapsed(Instant::now()), Relaxed);
        }
    }

    /// Resolves when the request being served is past its answer deadline.
    pub async fn overdue(&self) {
        poll_fn(|cx| {
            if self.overdue.load(Relaxed) {
                return Poll::Ready(());
            }
            self.waiter.register(cx.waker());
            if self.overdue.load(Relaxed) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// The connection's one timer, first due when the first head is (or
    /// sooner: see `next`).
    pub fn timer(&self) -> Sleep {
        tokio::time::sleep_until(self.epoch + self.period())
    }

    /// The longest the timer waits: a request that starts while it waits
    /// is still due for its answer after it fires.
    fn period(&self) -> Duration {
        self.timeouts.head.min(self.timeouts.answer)
    }

    /// The next event of the connection: `HeadExpired` when a head is
    /// overdue. Meanwhile marks requests past their answer deadline as
    /// overdue. `sleep` is the connection's one timer, reset here, never
    /// re-created: a request costs no timer-wheel entry. Polled in one
    /// `select!` beside the connection, in its task: every wake-up of the
    /// connection (a request ending, a write going through) looks again.
    pub async fn next(self: &Arc<Self>, mut sleep: Pin<&mut Sleep>) -> Event {
        poll_fn(|cx| self.poll_next(cx, sleep.as_mut(), None)).await
    }

    /// As `next`, and `Idle` once a request was served, its response
    /// written and the connection idle for `park_after` since (`idle`: the
    /// listener's idle connections).
    pub async fn next_or_idle(self: &Arc<Self>, mut sleep: Pin<&mut Sleep>, idle: &IdleConnections) -> Event {
        poll_fn(|cx| self.poll_next(cx, sleep.as_mut(), Some(idle))).await
    }

    fn poll_next(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        mut sleep: Pin<&mut Sleep>,
        park: Option<&IdleConnections>,
    ) -> Poll<Event> {
        loop {
            if let Some(idle) = park {
                if self.parkable(idle, cx) {
                    return Poll::Ready(Event::Idle);
                }
            }
            // Waiting for a head, due before the timer: the timer was set
            // while a request was served (to its answer deadline) and is
            // brought forward, once, so that an idle connection closes on
            // time. The lazy timer only ever moves later by itself.
            let since = self.since.load(Relaxed);
            if since & SERVING == 0 {
                let head_due = self.at(since) + self.timeouts.head;
                if head_due < sleep.deadline() {
                    sleep.as_mut().reset(head_due);
                }
            }
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            let since = self.since.load(Relaxed);
            let next = if since & SERVING == 0 {
                let deadline = self.at(since) + self.timeouts.head;
                if deadline <= now {
                    return Poll::Ready(Event::HeadExpired);
                }
                // A request may start before the timer fires again, and
                // its answer deadline must not come before that.
                deadline.min(now + self.timeouts.answer)
            } else {
                let deadline = self.at(since) + self.timeouts.answer;
                if deadline <= now {
                    self.overdue.store(true, Relaxed);
                    self.waiter.wake();
                    now + self.period() // the gateway answers 504 at once; look again later
                } else {
                    deadline
                }
            };
            sleep.as_mut().reset(next);
        }
    }

    /// Whether to park now. A connection whose last request came soon after
    /// the one before (`quick`) waits in `idle` once idle, hyper kept (its
    /// next request, likely soon, costs no new hyper connection and
    /// buffers), and `idle` marks it `park_now` once idle for `park_after`.
    /// Any other is parked as soon as it is idle: a client that sends now
    /// and then (thousands of connections at a modest rate) costs no entry
    /// and no second wake-up per request.
    fn parkable(self: &Arc<Self>, idle: &IdleConnections, cx: &Context<'_>) -> bool {
        // A load first: a swap would be a locked write on every poll.
        if self.park_now.load(Relaxed) {
            self.park_now.store(false, Relaxed);
            self.queued.store(false, Relaxed);
            if self.is_idle() {
                self.served.store(false, Relaxed);
                return true;
            }
        }
        if self.timeouts.park_after.is_zero() || !self.quick.load(Relaxed) {
            return self.take_idle();
        }
        if !self.queued.load(Relaxed) && self.take_idle() {
            self.queued.store(true, Relaxed);
            idle.push(self.clone(), self.idle_until(), cx.waker().clone());
        }
        false
    }

    /// Parked and woken by new bytes: a mark or a place in `IdleConnections`
    /// from before belongs to the hyper connection that is gone (an entry
    /// left in the queue looks at the connection as it is when due).
    pub fn unparked(&self) {
        self.park_now.store(false, Relaxed);
        self.queued.store(false, Relaxed);
    }

    /// No request is served and the last response is written.
    fn is_idle(&self) -> bool {
        self.since.load(Relaxed) & SERVING == 0 && !self.write_pending.load(Relaxed)
    }

    /// Idle: a request was served since the last time, its response is
    /// written and no other is being served.
    fn take_idle(&self) -> bool {
        let idle = self.is_idle() && self.served.load(Relaxed);
        if idle {
            self.served.store(false, Relaxed);
        }
        idle
    }

    /// When an idle connection will have been idle for `park_after`.
    fn idle_until(&self) -> Instant {
        self.at(self.since.load(Relaxed)) + self.timeouts.park_after
    }

    /// For `IdleConnections`, `now` that the connection's wait is due: parks
    /// it (`true`: wake its task) if idle since `park_after`; if idle for
    /// less (it served another request meanwhile), when to look again;
    /// if busy, takes it out (it waits again once idle).
    pub(super) fn idle_check(&self, now: Instant) -> IdleCheck {
        if !self.is_idle() {
            self.queued.store(false, Relaxed);
            return IdleCheck::Busy;
        }
        let until = self.idle_until();
        if until > now {
            return IdleCheck::NotYet(until);
        }
        self.park_now.store(true, Relaxed);
        IdleCheck::Park
    }
}

/// What `Deadlines::idle_check` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdleCheck {
    /// Marked to park: wake its task.
    Park,
    /// Idle, but not for long enough before this instant.
    NotYet(Instant),
    /// Serving or writing: out of the idle queue.
    Busy,
}

/// While alive, a request is being served (`Deadlines::serving`).
pub struct Serving(Arc<Deadlines>);

impl Drop for Serving {
    fn drop(&mut self) {
        let d = &self.0;
        d.since.store(d.elapsed(Instant::now()), Relaxed);
        d.served.store(true, Relaxed);
        d.answered.store(true, Relaxed);
    }
}

/// A response body that keeps its request `Serving` until hyper has taken
/// all of it (a file streamed in chunks may take a while): the connection
/// is not waiting for a head, nor idle, before that.
pub struct Guarded<B> {
    body: B,
    _serving: Serving,
}

impl<B> Guarded<B> {
    pub fn new(body: B, serving: Serving) -> Guarded<B> {
        Guarded { body, _serving: serving }
    }
}

impl<B: Body + Unpin> Body for Guarded<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, telling its `Deadlines` when bytes go out.
pub struct Stamped<S> {
    inner: S,
    deadlines: Arc<Deadlines>,
}

impl<S> Stamped<S> {
    pub fn new(inner: S, deadlines: Arc<Deadlines>) -> Stamped<S> {
        Stamped { inner, deadlines }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Stamped<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Stamped<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, data);
        let n = ready!(self.deadlines.track(written))?;
        self.deadlines.wrote();
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        let n = ready!(self.deadlines.track(written))?;
        self.deadlines.wrote();
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        self.deadlines.track(flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
