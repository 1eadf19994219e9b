//! The gateway's SERVER span (docs/TRACING.md), when `[tracing]` is on: a
//! child of the client's `traceparent`, or the root of a new trace (then
//! sampled by `[tracing] sample_ratio`). The service request carries the
//! span as its parent, so the core's span for it, and all that follows,
//! is this span's child. A client's trace id and `tracestate` are never
//! replaced; a context that is not recorded is passed on as it came.

use cumulo_service::trace::{AttrValue, Recorder, Span, SpanKind, SpanStatus, TraceParent};
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::StatusCode;
use std::time::{Instant, SystemTime};

pub(crate) struct ServerSpan {
    context: TraceParent,
    /// The client's span, when it sent a valid `traceparent`.
    parent: Option<[u8; 8]>,
    /// It sent one, valid or not.
    client_sent: bool,
    /// The client sent a context the gateway passes on unchanged (not
    /// recorded).
    passed_on: bool,
    /// What a recorded span keeps of the request; None when not recorded:
    /// a request outside the sample costs no allocation and no clock read.
    recorded: Option<Recorded>,
}

struct Recorded {
    start: SystemTime,
    started: Instant,
    method: String,
    path: String,
}

impl ServerSpan {
    pub(crate) fn start(parts: &Parts, recorder: &Recorder) -> ServerSpan {
        let header = parts.headers.get("traceparent");
        let client = header.and_then(|v| TraceParent::parse(v.as_bytes()));
        let (context, parent, passed_on) = match client {
            Some(tp) if tp.sampled() => (tp.child(cumulo_service::trace::new_span_id()), Some(tp.span_id), false),
            Some(tp) => (tp, None, true),
            None => {
                let root = TraceParent::root(true);
                let flags = recorder.sampler().root(&root.trace_id) as u8;
                (TraceParent { flags, ..root }, None, false)
            }
        };
        let recorded = (context.sampled() && !passed_on).then(|| Recorded {
            start: SystemTime::now(),
            started: Instant::now(),
            method: parts.method.as_str().to_string(),
            path: parts.uri.path().to_string(),
        });
        ServerSpan { context, parent, client_sent: header.is_some(), passed_on, recorded }
    }

    /// The service request's request_info, naming this span as the parent.
    pub(crate) fn request_info(&self, mut info: Vec<u8>) -> Vec<u8> {
        if self.passed_on {
            return info;
        }
        // The client's header is in `info` only when it sent one (and the
        // header filter let it through): a new trace is appended in place.
        if !self.client_sent {
            cumulo_service::info::push(&mut info, b"traceparent", &self.context.encode());
            return info;
        }
        match cumulo_service::trace::find(&info) {
            Some((_, at)) => cumulo_service::trace::with_parent(&info, at, &self.context),
            // One the spec refuses: dropped, so that no reader takes it
            // for the context (the first of a repeated key is read).
            None => {
                let mut out = Vec::with_capacity(info.len() + 70);
                for (k, v) in cumulo_service::info::parse(&info).map_while(Result::ok) {
                    if k != b"traceparent" {
                        cumulo_service::info::push(&mut out, k, v);
                    }
                }
                cumulo_service::info::push(&mut out, b"traceparent", &self.context.encode());
                out
            }
        }
    }

    /// `traceresponse`: the trace and this span, for the client's logs.
    pub(crate) fn traceresponse(&self) -> Option<HeaderValue> {
        HeaderValue::from_bytes(&self.context.encode()).ok()
    }

    /// The response is written: the span ends (recorded when sampled).
    pub(crate) fn finish(self, recorder: &Recorder, status: StatusCode, name: Option<&str>, remote: &str) {
        let Some(r) = self.recorded else { return };
        let mut attrs = vec![
            ("http.request.method", AttrValue::Str(r.method.clone().into())),
            ("url.path", AttrValue::Str(r.path.clone().into())),
            ("http.response.status_code", AttrValue::Int(status.as_u16() as i64)),
            ("client.address", AttrValue::Str(remote.to_string().into())),
            ("rpc.system", AttrValue::Str("cumulo".into())),
        ];
        if let Some(name) = name {
            attrs.push(("rpc.method", AttrValue::Str(name.to_string().into())));
        }
        recorder.record(Span {
            trace_id: self.context.trace_id,
            span_id: self.context.span_id,
            parent_id: self.parent.unwrap_or([0; 8]),
            parent_remote: self.parent.is_some(),
            flags: self.context.flags,
            kind: SpanKind::Server,
            name: format!("{} {}", r.method, r.path),
            start: r.start,
            end: r.start + r.started.elapsed(),
            // A server span is an error for 5xx only (OpenTelemetry's HTTP
            // conventions): a 4xx is the client's.
            status: match status.is_server_error() {
                true => SpanStatus::Error(format!("HTTP {}", status.as_u16())),
                false => SpanStatus::Unset,
            },
            attrs,
            links: vec![],
        });
    }
}
