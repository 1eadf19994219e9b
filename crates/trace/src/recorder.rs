//! The hand-off of finished spans from the event loops to the exporter's
//! thread: a channel bounded in spans and in bytes. A span that does not
//! fit is dropped and counted, never waited for: tracing must not delay a
//! request, whatever the exporter's collector does.

use crate::span::Span;
use crate::Sampler;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

pub const DEFAULT_MAX_QUEUE_SPANS: usize = 2048;
pub const DEFAULT_MAX_QUEUE_BYTES: usize = 4 << 20;

/// What tracing counted, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Spans recorded (handed to the channel or dropped there).
    pub recorded: AtomicU64,
    /// Dropped for want of room in the channel (the exporter is behind).
    pub dropped: AtomicU64,
    /// Sent to the collector and accepted.
    pub exported: AtomicU64,
    /// In batches the collector refused or that failed to reach it.
    pub failed: AtomicU64,
    /// Bytes waiting in the channel now.
    queued_bytes: AtomicUsize,
}

/// Records finished spans; cheap to clone (one per shard, one per service
/// that records its own).
#[derive(Clone)]
pub struct Recorder {
    tx: SyncSender<Span>,
    counters: Arc<Counters>,
    sampler: Sampler,
    max_bytes: usize,
}

/// What `Spans::next` got.
pub enum Next {
    Span(Span),
    /// None came in the time given.
    Waited,
    /// Every recorder is gone and the channel is empty.
    Closed,
}

/// The exporter's end of the channel.
pub struct Spans {
    rx: Receiver<Span>,
    counters: Arc<Counters>,
}

/// A channel that holds at most `max_spans` spans and `max_bytes` bytes.
pub fn channel(max_spans: usize, max_bytes: usize, sampler: Sampler) -> (Recorder, Spans) {
    let (tx, rx) = std::sync::mpsc::sync_channel(max_spans.max(1));
    let counters = Arc::new(Counters::default());
    (Recorder { tx, counters: counters.clone(), sampler, max_bytes }, Spans { rx, counters })
}

impl Recorder {
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Hands a finished span to the exporter, or drops it (counted) when
    /// the channel is full in spans or in bytes.
    pub fn record(&self, span: Span) {
        let c = &self.counters;
        c.recorded.fetch_add(1, Relaxed);
        let weight = span.weight();
        if c.queued_bytes.fetch_add(weight, Relaxed) + weight > self.max_bytes {
            c.queued_bytes.fetch_sub(weight, Relaxed);
            c.dropped.fetch_add(1, Relaxed);
            return;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(span) {
            c.queued_bytes.fetch_sub(weight, Relaxed);
            c.dropped.fetch_add(1, Relaxed);
        }
    }
}

impl Spans {
    /// The next span, waiting at most `wait`.
    pub fn next(&self, wait: Duration) -> Next {
        let got = match wait.is_zero() {
            true => self.rx.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            }),
            false => self.rx.recv_timeout(wait),
        };
        match got {
            Ok(span) => {
                self.counters.queued_bytes.fetch_sub(span.weight(), Relaxed);
                Next::Span(span)
            }
            Err(RecvTimeoutError::Timeout) => Next::Waited,
            Err(RecvTimeoutError::Disconnected) => Next::Closed,
        }
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SpanKind, SpanStatus};
    use std::time::SystemTime;

    fn span(name: &str) -> Span {
        Span {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent_id: [0; 8],
            parent_remote: false,
            flags: 1,
            kind: SpanKind::Client,
            name: name.into(),
            start: SystemTime::now(),
            end: SystemTime::now(),
            status: SpanStatus::Unset,
            attrs: vec![],
            links: vec![],
        }
    }

    #[test]
    fn a_full_channel_drops_and_counts_without_waiting() {
        let (rec, spans) = channel(2, 1 << 20, Sampler::always());
        for i in 0..5 {
            rec.record(span(&i.to_string()));
        }
        assert_eq!(rec.counters().dropped.load(Relaxed), 3);
        for want in ["0", "1"] {
            assert!(matches!(spans.next(Duration::ZERO), Next::Span(s) if s.name == want));
        }
        assert!(matches!(spans.next(Duration::ZERO), Next::Waited));
    }

    #[test]
    fn the_bytes_bound_drops_too() {
        let one = span("x").weight();
        let (rec, spans) = channel(100, one * 2, Sampler::always());
        for _ in 0..4 {
            rec.record(span("x"));
        }
        assert_eq!(rec.counters().dropped.load(Relaxed), 2);
        assert!(matches!(spans.next(Duration::ZERO), Next::Span(_)));
        rec.record(span("x"));
        assert_eq!(rec.counters().dropped.load(Relaxed), 2, "room again once one is taken");
        drop(rec);
        assert!(matches!(spans.next(Duration::ZERO), Next::Span(_)), "what was sent is received after");
        assert!(matches!(spans.next(Duration::ZERO), Next::Span(_)));
        assert!(matches!(spans.next(Duration::from_millis(1)), Next::Closed));
    }
}
