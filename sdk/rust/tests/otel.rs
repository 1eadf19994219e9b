//! `cumulo::otel` (feature `otel`): a span started with a request's context
//! is the request's child, and `inject` puts that span's context in a
//! call's request_info; without a span or a trace context nothing changes.

use cumulo::{info, otel, Request, TransId};
use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, Tracer, TracerProvider};
use opentelemetry::Context;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
const STATE: &str = "congo=t61rcWkgMzE";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT_ID}-01")
}

fn request(request_info: &[u8]) -> Request<'_> {
    Request {
        name: "/tests/a/get",
        pattern: "/tests/a/get",
        request_info,
        request: b"",
        timeout: 1000,
        priority: 0,
        trans_id: TransId([0; 16]),
        source: 0,
        sync: false,
    }
}

#[test]
fn a_span_with_the_requests_context_is_its_child_and_the_parent_of_a_call() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let traced = info::encode(&[("accept", "text/plain"), ("traceparent", &traceparent()), ("tracestate", STATE)]);
    let req = request(&traced);

    let parent = otel::context(&req);
    let cx = parent.with_span(provider.tracer("test").start_with_context("work", &parent));
    let sent = otel::inject(&info::encode(&[("k", "v"), ("traceparent", "old")]), &cx);
    cx.span().end();

    let spans = exporter.get_finished_spans().unwrap();
    let [span] = spans.as_slice() else { panic!("{} spans exported, want 1", spans.len()) };
    assert_eq!(span.span_context.trace_id(), TraceId::from_hex(TRACE_ID).unwrap(), "in the request's trace");
    assert_eq!(span.parent_span_id, SpanId::from_hex(PARENT_ID).unwrap(), "the request's span is its parent");
    assert!(span.parent_span_is_remote);
    let child = format!("00-{TRACE_ID}-{}-01", span.span_context.span_id());
    assert_eq!(
        sent,
        info::encode(&[("k", "v"), ("traceparent", &child), ("tracestate", STATE)]),
        "the span's own id, in place of the old traceparent"
    );
}

#[test]
fn without_a_span_or_a_trace_context_nothing_is_added() {
    let kv = info::encode(&[("k", "v")]);
    assert_eq!(otel::inject(&kv, &Context::new()), kv, "no span");
    assert_eq!(otel::inject(&kv, &Context::current()), kv, "no span current");

    let untraced = otel::context(&request(&kv));
    assert!(!untraced.span().span_context().is_valid(), "a request without traceparent");
    assert!(!untraced.has_active_span());
    assert_eq!(otel::inject(b"", &untraced), b"", "a request without one adds nothing");
    let invalid = info::encode(&[("traceparent", "nonsense")]);
    assert!(!otel::context(&request(&invalid)).span().span_context().is_valid(), "an invalid traceparent");

    // The request's own context, injected as it is, replaces an old pair.
    let traced = info::encode(&[("traceparent", traceparent().as_str()), ("tracestate", STATE)]);
    let cx = otel::context(&request(&traced));
    assert_eq!(otel::inject(&info::encode(&[("traceparent", "old")]), &cx), traced, "replaced");
    // Not key/value encoded: sent as given.
    assert_eq!(otel::inject(b"raw", &cx), b"raw");
}
