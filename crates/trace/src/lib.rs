//! Tracing in the core: W3C trace context read from and written into
//! request_info, the sampling decision, and finished spans handed to an
//! exporter without ever blocking the thread that records them.
//!
//! - `context`: `traceparent` (W3C Trace Context): parse, format, find it
//!   in request_info and write a request_info that names another parent;
//! - `sampler`: parent-based, with a ratio for the traces the core starts;
//! - `span`: a finished span as the core records it (plain data: the
//!   exporter crate turns it into OpenTelemetry's types);
//! - `recorder`: the bounded hand-off from the event loops to the
//!   exporter's thread, and what it counts.
//!
//! This crate names no OpenTelemetry or HTTP library, so the router can
//! record spans without compiling an exporter: `cumulo-otlp` is the one
//! crate that exports.

mod context;
mod recorder;
mod sampler;
mod span;

pub use context::{append, find, new_span_id, new_trace_id, with_parent, TraceParent, TRACEPARENT, TRACESTATE};
pub use recorder::{channel, Counters, Next, Recorder, Spans, DEFAULT_MAX_QUEUE_BYTES, DEFAULT_MAX_QUEUE_SPANS};
pub use sampler::Sampler;
pub use span::{Attr, AttrValue, Span, SpanKind, SpanStatus};
