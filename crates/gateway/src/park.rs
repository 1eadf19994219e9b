//! Idle keep-alive connections without hyper. hyper's HTTP/1 connection
//! keeps an 8 KiB read buffer and an 8 KiB write buffer for its whole life
//! (no builder option shrinks them below 8 KiB), and a connection waiting
//! for its next request touches pages of both: about 11 KB resident per
//! idle connection. So a connection is served by hyper only from the first
//! bytes of a request to its written response: in between it is "parked",
//! the socket alone waiting to become readable, and hyper's connection is
//! taken apart (`into_parts`, which hands back the socket and any bytes
//! read ahead) and dropped. The bytes that wake a parked connection are
//! handed to the next hyper connection first (`Rewind`).
//!
//! A connection is parked only when hyper is between requests (deadlines/
//! `Event::Idle`: a request was served, its response is written, nothing
//! is being served), and at most once per request served, so a head that
//! arrives in pieces is parsed by one hyper connection, not once per piece.

use super::deadlines::{Deadlines, IdleCheck};
use bytes::{Bytes, BytesMut};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Bytes read at once while parked; more stay in the socket for hyper.
const WAKE_READ: usize = 2048;

/// Connections waiting to be parked, oldest first: at most one entry per
/// connection that keeps hyper (`Deadlines::queued`), plus those left by
/// connections parked or closed in the last `park_after`, dropped when due
/// (an entry acts on the connection as it is then, never on what it was).
#[derive(Default)]
pub struct IdleConnections {
    queue: RefCell<VecDeque<Waiting>>,
    /// The task running `sweep`, woken when the queue stops being empty.
    sweeper: Cell<Option<Waker>>,
}

struct Waiting {
    due: Instant,
    deadlines: Arc<Deadlines>,
    /// The connection's task.
    task: Waker,
}

/// Entries looked at before `sweep` lets the other tasks of the thread run.
const SWEEP_BATCH: usize = 1024;

impl IdleConnections {
    /// A connection went idle; it is looked at again at `due`.
    pub fn push(&self, deadlines: Arc<Deadlines>, due: Instant, task: Waker) {
        let mut queue = self.queue.borrow_mut();
        if queue.is_empty() {
            if let Some(w) = self.sweeper.take() {
                w.wake();
            }
        }
        queue.push_back(Waiting { due, deadlines, task });
    }

    /// Parks the connections idle for their `park_after` (by waking their
    /// tasks, which take hyper apart), forever; run beside the listener's
    /// accept loop.
    pub async fn sweep(&self) {
        let sleep = tokio::time::sleep_until(Instant::now());
        tokio::pin!(sleep);
        loop {
            match self.due_now(Instant::now()) {
                Next::At(due) => {
                    sleep.as_mut().reset(due);
                    sleep.as_mut().await;
                }
                Next::Empty => {
                    poll_fn(|cx| {
                        if self.queue.borrow().is_empty() {
                            self.sweeper.set(Some(cx.waker().clone()));
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await
                }
                Next::More => tokio::task::yield_now().await,
            }
        }
    }

    /// Looks at the entries due by `now`, at most `SWEEP_BATCH`.
    fn due_now(&self, now: Instant) -> Next {
        let mut queue = self.queue.borrow_mut();
        for _ in 0..SWEEP_BATCH {
            match queue.front() {
                None => return Next::Empty,
                Some(w) if w.due > now => return Next::At(w.due),
                Some(_) => {}
            }
            let Some(mut w) = queue.pop_front() else { break };
            match w.deadlines.idle_check(now) {
                IdleCheck::Park => w.task.wake(),
                // Served again since it was queued: its place moves back
                // (the queue stays nearly in time order: a later entry due
                // a little earlier waits at most `park_after` more).
                IdleCheck::NotYet(due) => {
                    w.due = due;
                    queue.push_back(w);
                }
                IdleCheck::Busy => {}
            }
        }
        Next::More
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queue.borrow().len()
    }
}

enum Next {
    Empty,
    At(Instant),
    More,
}

/// A stream that first gives back bytes already read from it.
pub struct Rewind<S> {
    inner: S,
    prefix: Bytes,
}

impl<S> Rewind<S> {
    pub fn new(inner: S) -> Rewind<S> {
        Rewind { inner, prefix: Bytes::new() }
    }

    /// `bytes` (read ahead by hyper) come before what is left.
    pub fn unread(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        if self.prefix.is_empty() {
            self.prefix = bytes;
        } else {
            let mut joined = BytesMut::with_capacity(bytes.len() + self.prefix.len());
            joined.extend_from_slice(&bytes);
            joined.extend_from_slice(&self.prefix);
            self.prefix = joined.freeze();
        }
    }
}

impl<S: AsyncRead + Unpin> Rewind<S> {
    /// Waits for new bytes from the stream and keeps them for the next
    /// reader; 0 at the end of the stream.
    pub async fn fill(&mut self) -> io::Result<usize> {
        poll_fn(|cx| {
            let mut space = [0u8; WAKE_READ];
            let mut buf = ReadBuf::new(&mut space);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            if n > 0 {
                let mut joined = BytesMut::with_capacity(self.prefix.len() + n);
                joined.extend_from_slice(&self.prefix);
                joined.extend_from_slice(buf.filled());
                self.prefix = joined.freeze();
            }
            Poll::Ready(Ok(n))
        })
        .await
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadlines::{Event, Timeouts};
    use std::future::Future;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const PARK_AFTER: Duration = Duration::from_millis(20);

    fn deadlines() -> Arc<Deadlines> {
        Deadlines::new(Timeouts {
            head: Duration::from_secs(5),
            answer: Duration::from_secs(3),
            park_after: PARK_AFTER,
        })
    }

    /// One connection's deadlines, its timer and its listener's queue.
    struct Conn {
        d: Arc<Deadlines>,
        idle: IdleConnections,
        sleep: Pin<Box<tokio::time::Sleep>>,
    }

    impl Conn {
        /// A busy client's connection: its first request answered (and
        /// parked at once: a first request is never quick), then a second
        /// at once; idle now, waiting in the queue, hyper kept.
        async fn busy() -> Conn {
            let d = deadlines();
            let sleep = Box::pin(d.timer());
            let mut c = Conn { d, idle: IdleConnections::default(), sleep };
            drop(c.d.serving());
            assert_eq!(c.poll().await, Poll::Ready(Event::Idle), "a first request: parked at once");
            assert_eq!(c.idle.len(), 0);
            c.d.unparked();
            drop(c.d.serving());
            assert!(c.poll().await.is_pending(), "a quick one: not parked at once");
            assert_eq!(c.idle.len(), 1);
            c
        }

        /// Polls `next_or_idle` once (its state is in `Deadlines` and the
        /// timer, so a new future each time polls the same thing).
        async fn poll(&mut self) -> Poll<Event> {
            let mut next = Box::pin(self.d.next_or_idle(self.sleep.as_mut(), &self.idle));
            poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_idle_connection_is_parked_once_idle_for_park_after_counted_from_its_last_request() {
        let mut c = Conn::busy().await;
        // Another request 10 ms later: hyper is still there, and the
        // connection keeps its one place in the queue.
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(c.d.serving());
        assert!(c.poll().await.is_pending());
        assert_eq!(c.idle.len(), 1, "one entry per connection");
        let start = Instant::now();
        let event = tokio::select! {
            e = c.d.next_or_idle(c.sleep.as_mut(), &c.idle) => e,
            () = c.idle.sweep() => unreachable!("the sweep never ends"),
        };
        assert_eq!((event, start.elapsed()), (Event::Idle, PARK_AFTER), "idle for 20 ms since the second request");
        assert_eq!(c.idle.len(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_request_that_starts_before_the_task_parks_keeps_hyper() {
        let mut c = Conn::busy().await;
        tokio::time::sleep(PARK_AFTER - Duration::from_millis(1)).await;
        let serving = c.d.serving(); // the next request, quick again
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(matches!(c.idle.due_now(Instant::now()), Next::Empty), "busy when due: out of the queue");
        assert!(c.poll().await.is_pending(), "not parked while serving");
        drop(serving);
        assert!(c.poll().await.is_pending());
        assert_eq!(c.idle.len(), 1, "queued again once idle");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_request_after_a_longer_wait_is_parked_as_soon_as_it_is_answered() {
        let mut c = Conn::busy().await;
        tokio::time::sleep(PARK_AFTER).await;
        assert!(matches!(c.idle.due_now(Instant::now()), Next::Empty));
        assert_eq!(c.poll().await, Poll::Ready(Event::Idle), "parked by the queue");
        c.d.unparked();
        tokio::time::sleep(PARK_AFTER).await;
        drop(c.d.serving()); // 20 ms after the last response
        assert_eq!(c.poll().await, Poll::Ready(Event::Idle));
        assert_eq!(c.idle.len(), 0, "no entry, no second wake-up");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_mark_made_while_parked_is_forgotten_when_bytes_wake_the_connection() {
        let mut c = Conn::busy().await;
        tokio::time::sleep(PARK_AFTER).await;
        assert!(matches!(c.idle.due_now(Instant::now()), Next::Empty), "marked to park");
        c.d.unparked(); // (as if parked meanwhile) bytes arrive: a new hyper connection
        assert!(c.poll().await.is_pending(), "a head in pieces is not parked");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_connection_busy_when_due_leaves_the_queue_until_idle_again() {
        let mut c = Conn::busy().await;
        let serving = c.d.serving();
        tokio::time::sleep(PARK_AFTER).await;
        assert!(matches!(c.idle.due_now(Instant::now()), Next::Empty));
        assert_eq!(c.idle.len(), 0, "busy: out of the queue");
        drop(serving);
        assert!(c.poll().await.is_pending());
        assert_eq!(c.idle.len(), 1);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_entry_of_a_closed_connection_is_dropped_when_due() {
        let (d, idle) = (deadlines(), IdleConnections::default());
        drop(d.serving());
        // Its task is gone: nothing to wake.
        idle.push(d, Instant::now() + PARK_AFTER, futures_util::task::noop_waker());
        tokio::time::sleep(PARK_AFTER).await;
        assert!(matches!(idle.due_now(Instant::now()), Next::Empty));
        assert_eq!(idle.len(), 0);
    }

    #[tokio::test]
    async fn bytes_read_ahead_come_first_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut r = Rewind::new(server);
        client.write_all(b"GET / HT").await.unwrap();
        assert_eq!(r.fill().await.unwrap(), 8);
        r.unread(Bytes::from_static(b"(ahead)"));
        client.write_all(b"TP/1.1\r\n").await.unwrap();
        drop(client);
        let mut all = Vec::new();
        r.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"(ahead)GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn fill_reports_the_end_of_the_stream() {
        let (client, server) = tokio::io::duplex(64);
        drop(client);
        assert_eq!(Rewind::new(server).fill().await.unwrap(), 0);
    }
}
