//! Through the session: a handler's call made inside its own span, with
//! `otel::inject`, carries the span's id rather than the request's (the SDK
//! appends the request's context only to a request_info without one), and
//! a call outside the span still inherits the request's.

use super::fake_core::{request, returned, tid, FakeCore};
use crate::{otel, Answer, SendOptions};
use cumulo_proto::{decode, info, kind, Frame};
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const STATE: &str = "congo=t61rcWkgMzE";

fn sent_info(f: &[u8]) -> Vec<u8> {
    let Ok(Frame::SendAsync(s)) = decode(f) else { panic!("expected a SEND_ASYNC") };
    s.request_info.to_vec()
}

#[test]
fn a_call_inside_a_handlers_span_carries_the_spans_id() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let traced = info::encode(&[("traceparent", PARENT), ("tracestate", STATE)]);
    let (tx, rx) = std::sync::mpsc::channel();
    let (core, mut api) = FakeCore::with_api(move |peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let r = cumulo_proto::Request { request_info: &traced, ..request(tid(1), "/fake/a", b"") };
        peer.write(|b| cumulo_proto::encode_request(b, &r));
        let child = sent_info(&peer.expect(kind::SEND_ASYNC));
        let after = sent_info(&peer.expect(kind::SEND_ASYNC));
        assert_eq!(returned(&peer.frame()).0, 0, "the handler's answer");
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
        tx.send((child, after)).unwrap();
    });
    let tracer = provider.tracer("test");
    api.subscribe("a", move |api, req| {
        let parent = otel::context(req);
        let cx = parent.with_span(tracer.start_with_context("work", &parent));
        api.send_async("/child", &otel::inject(&info::encode(&[("k", "v")]), &cx), b"", SendOptions::default());
        cx.span().end();
        // Outside the span: the request's own context, as the SDK appends it.
        api.send_async("/after", &info::encode(&[("k", "v")]), b"", SendOptions::default());
        Ok(Answer::body("done"))
    })
    .unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();

    let (child, after) = rx.recv().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let [span] = spans.as_slice() else { panic!("{} spans exported, want 1", spans.len()) };
    let own = format!("00-{TRACE_ID}-{}-01", span.span_context.span_id());
    assert_eq!(child, info::encode(&[("k", "v"), ("traceparent", own.as_str()), ("tracestate", STATE)]));
    assert_eq!(after, info::encode(&[("k", "v"), ("traceparent", PARENT), ("tracestate", STATE)]));
}
