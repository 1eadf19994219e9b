//! Spans of the requests this core routes (docs/TRACING.md), when
//! `[tracing]` is on: one CLIENT span per request a service sends (per
//! copy of a multicast; per attempt of a retried request; a forward's leg
//! a child of the request it forwards), one SERVER span per request that
//! arrives from another node. The request is delivered with its
//! `traceparent` naming the span as the parent, so what the service does
//! is that span's child; the trace id, the flags and `tracestate` are the
//! sender's, never replaced.
//!
//! A request with no trace context starts a trace here (`start_traces`),
//! recorded for the sampler's share of them; one that is not recorded is
//! still delivered with a traceparent (sampled flag off), so that the
//! decision is made once for the whole trace.
//!
//! Off (`Core::spans` None), each hook is one branch. On, a request costs
//! a table entry while in flight and a plain record at its end, handed to
//! the exporter's thread (`cumulo_trace::Recorder`: bounded, never waits).

use cumulo_proto::{Status, TransId};
use cumulo_trace::{AttrValue, Recorder, Span, SpanKind, SpanStatus, TraceParent};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

/// How a request came to be routed: the span's name says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    SendSync,
    SendAsync,
    Mcast,
    Forward,
    /// From another node (a SERVER span).
    FromNode,
}

impl Call {
    fn as_str(self) -> &'static str {
        match self {
            Call::SendSync => "send_sync",
            Call::SendAsync => "send_async",
            Call::Mcast => "mcast_async",
            Call::Forward => "forward",
            Call::FromNode => "from_node",
        }
    }
}

/// A request's span while the request is in flight.
struct Open {
    context: TraceParent,
    parent: [u8; 8],
    parent_remote: bool,
    call: Call,
    name: Box<str>,
    pattern: Option<Rc<str>>,
    start: SystemTime,
    started: Instant,
    delivered: Option<Instant>,
    timeout_ms: u32,
    priority: i8,
    attempt: u8,
    /// Why the last attempt failed, when a retry follows it.
    failed: Option<Status>,
}

pub(crate) struct CallSpans {
    recorder: Recorder,
    start_traces: bool,
    node: u32,
    open: RefCell<ahash::AHashMap<TransId, Open>>,
}

/// The request's routing facts a span keeps.
pub(crate) struct Facts<'a> {
    pub call: Call,
    pub name: &'a str,
    pub timeout_ms: u32,
    pub priority: i8,
    pub now: Instant,
}

impl CallSpans {
    pub(crate) fn new(recorder: Recorder, start_traces: bool, node: u32) -> CallSpans {
        CallSpans { recorder, start_traces, node, open: RefCell::default() }
    }

    /// A request accepted now: opens its span when its trace is recorded,
    /// and returns the request_info to route it with, its traceparent
    /// naming the span (or the unrecorded trace it starts). None: route it
    /// as it came (a context not recorded, or none and none to start).
    pub(crate) fn begin(&self, tid: TransId, info: &[u8], f: &Facts<'_>) -> Option<Vec<u8>> {
        let (context, parent, at) = match cumulo_trace::find(info) {
            Some((tp, _)) if !tp.sampled() => return None,
            Some((tp, at)) => (tp.child(cumulo_trace::new_span_id()), Some(tp.span_id), Some(at)),
            None if !self.start_traces || f.call == Call::FromNode => return None,
            None => {
                let root = TraceParent::root(true);
                if !self.recorder.sampler().root(&root.trace_id) {
                    // Not recorded; the decision travels with the request.
                    let unrecorded = TraceParent { flags: 0, ..root };
                    return Some(cumulo_trace::append(info, &unrecorded));
                }
                (root, None, None)
            }
        };
        self.open.borrow_mut().insert(
            tid,
            Open {
                context,
                parent: parent.unwrap_or([0; 8]),
                parent_remote: parent.is_some(),
                call: f.call,
                name: f.name.into(),
                pattern: None,
                start: SystemTime::now(),
                started: f.now,
                delivered: None,
                timeout_ms: f.timeout_ms,
                priority: f.priority,
                attempt: 0,
                failed: None,
            },
        );
        let info = match at {
            Some(at) => cumulo_trace::with_parent(info, at, &context),
            None => cumulo_trace::append(info, &context),
        };
        Some(info)
    }

    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Whether any span is open (the hooks below cost nothing more when not).
    #[inline]
    pub(crate) fn any_open(&self) -> bool {
        !self.open.borrow().is_empty()
    }

    /// The request was handed to an instance of `pattern` (or queued
    /// there, `queued`): the span learns the pattern, and when the wait
    /// in the queue ended.
    pub(crate) fn delivered(&self, tid: &TransId, pattern: &Rc<str>, queued: bool, now: Instant) {
        if let Some(o) = self.open.borrow_mut().get_mut(tid) {
            o.pattern = Some(pattern.clone());
            o.delivered = (!queued).then_some(now);
        }
    }

    /// A queued request reached its instance.
    pub(crate) fn dequeued(&self, tid: &TransId, now: Instant) {
        if let Some(o) = self.open.borrow_mut().get_mut(tid) {
            o.delivered.get_or_insert(now);
        }
    }

    /// The request's sender got its answer (or error): the span ends.
    pub(crate) fn end(&self, tid: &TransId, status: Status, why: &[u8], now: Instant) {
        let Some(open) = self.open.borrow_mut().remove(tid) else { return };
        let why = (status != Status::Ok).then(|| String::from_utf8_lossy(&why[..why.len().min(256)]).into_owned());
        self.record(*tid, open, status, why, now);
    }

    /// The attempt in flight failed with `status` and a retry follows.
    pub(crate) fn attempt_failed(&self, tid: &TransId, status: Status) {
        if let Some(o) = self.open.borrow_mut().get_mut(tid) {
            o.failed = Some(status);
        }
    }

    /// A retry of `tid` is routed now: the failed attempt's span ends, the
    /// next one opens (same parent, the next number); returns the
    /// request_info naming it.
    pub(crate) fn next_attempt(&self, tid: &TransId, info: &[u8], now: Instant) -> Option<Vec<u8>> {
        let mut open = self.open.borrow_mut();
        let o = open.get_mut(tid)?;
        let next = Open {
            context: o.context.child(cumulo_trace::new_span_id()),
            parent: o.parent,
            parent_remote: o.parent_remote,
            call: o.call,
            name: o.name.clone(),
            pattern: None,
            start: SystemTime::now(),
            started: now,
            delivered: None,
            timeout_ms: o.timeout_ms,
            priority: o.priority,
            attempt: o.attempt.saturating_add(1),
            failed: None,
        };
        let context = next.context;
        let done = std::mem::replace(o, next);
        drop(open);
        let status = done.failed.unwrap_or(Status::Other(0));
        self.record(*tid, done, status, Some("retried".into()), now);
        let info = match cumulo_trace::find(info) {
            Some((_, at)) => cumulo_trace::with_parent(info, at, &context),
            None => cumulo_trace::append(info, &context),
        };
        Some(info)
    }

    /// A handler forwarded `tid`: the leg that reached it ends; the
    /// forward's opens, a child of the context the forward carries (the
    /// SDK gives it the forwarded request's).
    pub(crate) fn forwarded(&self, tid: TransId, info: &[u8], f: &Facts<'_>) -> Option<Vec<u8>> {
        if let Some(open) = self.open.borrow_mut().remove(&tid) {
            self.record(tid, open, Status::Ok, None, f.now);
        }
        self.begin(tid, info, f)
    }

    /// Entries whose request left without an answer from here (handed
    /// back to another shard or node): dropped once they outnumber the
    /// requests in flight.
    pub(crate) fn sweep(&self, inflight: &ahash::AHashMap<TransId, crate::state::InFlight>) {
        let mut open = self.open.borrow_mut();
        if open.len() > 2 * inflight.len() + 1024 {
            open.retain(|tid, _| inflight.contains_key(tid));
        }
    }

    fn record(&self, tid: TransId, o: Open, status: Status, why: Option<String>, now: Instant) {
        let end = o.start + now.saturating_duration_since(o.started);
        let label = o.pattern.as_deref().unwrap_or(&o.name);
        let kind = if o.call == Call::FromNode { SpanKind::Server } else { SpanKind::Client };
        let mut attrs = vec![
            ("rpc.system", AttrValue::Str("cumulo".into())),
            ("rpc.method", AttrValue::Str(o.name.to_string().into())),
            ("cumulo.call", AttrValue::Str(o.call.as_str().into())),
            ("cumulo.trans_id", AttrValue::Str(tid.to_string().into())),
            ("cumulo.timeout_ms", AttrValue::Int(o.timeout_ms as i64)),
            ("cumulo.priority", AttrValue::Int(o.priority as i64)),
            ("cumulo.node", AttrValue::Int(self.node as i64)),
            ("cumulo.attempt", AttrValue::Int(o.attempt as i64)),
            ("cumulo.status", AttrValue::Str(status_name(status).into())),
        ];
        if let Some(p) = &o.pattern {
            attrs.push(("rpc.service", AttrValue::Str(p.to_string().into())));
        }
        if let Some(at) = o.delivered {
            let queued = at.saturating_duration_since(o.started).as_micros() as i64;
            let served = now.saturating_duration_since(at).as_micros() as i64;
            attrs.push(("cumulo.queued_us", AttrValue::Int(queued)));
            attrs.push(("cumulo.service_us", AttrValue::Int(served)));
        }
        let status = match (status, why) {
            (Status::Ok, _) => SpanStatus::Unset,
            (s, Some(why)) if !why.is_empty() => SpanStatus::Error(format!("{}: {why}", status_name(s))),
            (s, _) => SpanStatus::Error(status_name(s).into()),
        };
        self.recorder.record(Span {
            trace_id: o.context.trace_id,
            span_id: o.context.span_id,
            parent_id: o.parent,
            parent_remote: o.parent_remote,
            flags: o.context.flags,
            kind,
            name: format!("{} {label}", o.call.as_str()),
            start: o.start,
            end,
            status,
            attrs,
            links: vec![],
        });
    }
}

fn status_name(s: Status) -> &'static str {
    match s {
        Status::Other(0) => "FAILED",
        s => s.name(),
    }
}
