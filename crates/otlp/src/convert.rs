//! cumulo's span records in OpenTelemetry's types.

use cumulo_trace::{AttrValue, Span, SpanKind, SpanStatus};
use opentelemetry::trace::{Link, SpanContext, SpanId, SpanKind as OtelKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};

pub(crate) fn span_data(span: Span, scope: &InstrumentationScope) -> SpanData {
    let context = |trace: [u8; 16], span_id: [u8; 8], remote: bool| {
        SpanContext::new(
            TraceId::from_bytes(trace),
            SpanId::from_bytes(span_id),
            TraceFlags::new(span.flags),
            remote,
            TraceState::NONE,
        )
    };
    let links = span.links.iter().map(|(trace, id)| Link::with_context(context(*trace, *id, true))).collect::<Vec<_>>();
    let mut span_links = SpanLinks::default();
    span_links.links = links;
    SpanData {
        span_context: context(span.trace_id, span.span_id, false),
        parent_span_id: SpanId::from_bytes(span.parent_id),
        parent_span_is_remote: span.parent_remote,
        span_kind: match span.kind {
            SpanKind::Server => OtelKind::Server,
            SpanKind::Client => OtelKind::Client,
            SpanKind::Internal => OtelKind::Internal,
        },
        name: span.name.into(),
        start_time: span.start,
        end_time: span.end,
        attributes: span.attrs.into_iter().map(|(k, v)| KeyValue::new(k, value(v))).collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: span_links,
        status: match span.status {
            SpanStatus::Unset => Status::Unset,
            SpanStatus::Ok => Status::Ok,
            SpanStatus::Error(why) => Status::error(why),
        },
        instrumentation_scope: scope.clone(),
    }
}

fn value(v: AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => Value::String(s.into()),
        AttrValue::Int(i) => Value::I64(i),
        AttrValue::Bool(b) => Value::Bool(b),
    }
}
