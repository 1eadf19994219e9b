//! Joining an application's own OpenTelemetry spans (PROTOCOL.md 5.1;
//! feature `otel`).
//!
//! The SDK passes a request's trace context on by itself: a handler's calls
//! inherit it. An application that records spans of its own with the
//! OpenTelemetry API makes them part of the same trace with two calls:
//!
//! ```no_run
//! use cumulo::{Answer, Api, SendOptions};
//! use opentelemetry::global;
//! use opentelemetry::trace::{TraceContextExt, Tracer};
//!
//! # fn setup(api: &mut Api) -> cumulo::Result<()> {
//! api.subscribe("stock/check", |api, req| {
//!     let parent = cumulo::otel::context(req);
//!     let cx = parent.with_span(global::tracer("stock").start_with_context("work", &parent));
//!     // this call is the span's child, not the request's
//!     api.send_sync("/stock/get", &cumulo::otel::inject(b"", &cx), b"", SendOptions::default())?;
//!     Ok(Answer::body("done"))
//! })
//! # }
//! ```
//!
//! The crates `opentelemetry` and `opentelemetry_sdk` (0.33, for its W3C
//! propagator) are built only with the feature.

use crate::Request;
use cumulo_proto::info;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;

const KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// The request's trace context: a context whose span context is the
/// request's remote one, the parent of the spans the handler starts. An
/// empty context (no valid span context) when the request has no valid
/// `traceparent`: a span started with it starts a trace.
pub fn context(request: &Request<'_>) -> Context {
    let mut carrier = HashMap::new();
    // A malformed request_info, or a value that is not UTF-8, passes nothing.
    for (key, value) in info::parse(request.request_info).map_while(Result::ok) {
        let (Ok(key), Ok(value)) = (std::str::from_utf8(key), std::str::from_utf8(value)) else { continue };
        if KEYS.contains(&key) && !carrier.contains_key(key) {
            // the first of a repeated key, as the SDK reads it
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    // From an empty context, not the current one: the request's is the parent.
    TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier)
}

/// `request_info` with the `traceparent` and `tracestate` of `cx`'s span
/// context (`&Context::current()` for the current span) in place of any it
/// had, after its other pairs. A call whose request_info names a
/// `traceparent` is sent as it is, so the span's context wins over the one
/// the SDK would append. `request_info` is returned as it is when `cx` has
/// no valid span context, or when it is not key/value encoded.
pub fn inject(request_info: &[u8], cx: &Context) -> Vec<u8> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    let Some(parent) = carrier.get(KEYS[0]) else { return request_info.to_vec() };
    let Ok(pairs) = info::parse_all(request_info) else { return request_info.to_vec() };
    let mut out = Vec::with_capacity(request_info.len() + 128);
    for (key, value) in pairs {
        if !KEYS.iter().any(|k| k.as_bytes() == key) {
            info::push(&mut out, key, value);
        }
    }
    info::push(&mut out, KEYS[0].as_bytes(), parent.as_bytes());
    if let Some(state) = carrier.get(KEYS[1]).filter(|s| !s.is_empty()) {
        info::push(&mut out, KEYS[1].as_bytes(), state.as_bytes());
    }
    out
}
