//! The span exporter: one thread of its own takes finished spans from the
//! bounded channel the event loops record into (`cumulo_trace::channel`),
//! batches them, turns them into OpenTelemetry's `SpanData` and sends them
//! with `opentelemetry-otlp` over OTLP/HTTP (protobuf). A collector that is
//! slow or gone makes the channel fill and spans drop (counted); no
//! request ever waits for it.
//!
//! The SDK's own `BatchSpanProcessor` is not used: it sits behind the
//! `Tracer` API, which would make the event loop build OpenTelemetry
//! contexts and spans on the hot path and would count drops only in a log
//! line. Here the hot path builds a plain record, and every counter reaches
//! `/metrics`.

mod convert;
mod exporter;

pub use cumulo_trace::Recorder;
pub use exporter::{start, Exporter};
