//! The dashboard: one page served by the admin API (`GET /dashboard`), its
//! script and style embedded in the binary, and the two calls it needs
//! besides the rest of the API: `GET /v1/stats` (counters and latency
//! histograms, from which the page computes rates and percentiles over the
//! last seconds) and `GET /v1/logs` (the recent log lines).
//!
//! The page and its assets hold no data and are served without the token;
//! every call the page makes carries it (`Authorization: Bearer`), read
//! from the URL fragment (`#token=...`, never sent to a server) or asked for.

use super::reply::{self, Answer, ApiError, Body};
use super::{recent_logs, views, AdminContext};
use cumulo_router::DURATION_BOUNDS_US;
use hyper::{Response, StatusCode};
use serde_json::json;

const PAGE: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

pub fn page() -> Response<Body> {
    asset("text/html; charset=utf-8", PAGE)
}

pub fn script() -> Response<Body> {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub fn style() -> Response<Body> {
    asset("text/css; charset=utf-8", STYLE)
}

fn asset(content_type: &'static str, text: &'static str) -> Response<Body> {
    let mut r = reply::with_type(StatusCode::OK, content_type, text.as_bytes().to_vec());
    let h = r.headers_mut();
    h.insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-cache"));
    // The page loads only its own script and style, and talks only to this API.
    h.insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        hyper::header::HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(hyper::header::X_CONTENT_TYPE_OPTIONS, hyper::header::HeaderValue::from_static("nosniff"));
    r
}

/// Per service: the counters that only grow and the request-duration
/// histogram (per bucket, not cumulative), with the time they were read.
pub async fn stats(ctx: &AdminContext) -> Answer {
    let reports = views::reports(ctx).await;
    let services: Vec<serde_json::Value> = ctx
        .supervisor
        .services()
        .iter()
        .map(|s| {
            let load = reports.service(Some(s.id));
            let m = &load.counts;
            json!({
                "id": s.id,
                "prefix": &*s.prefix,
                "received": m.received,
                "handled": m.handled(),
                "errors": m.failed(),
                "error_answers": m.error_answers(),
                "timeouts": m.timeouts(),
                "instances": load.instances,
                "queued": load.queued,
                "duration_buckets": m.duration.counts,
            })
        })
        .collect();
    let time_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let st = &reports.stats();
    // `[tracing]`: what the span exporter counted; null when off.
    let tracing = ctx.core.borrow().tracer().map(|t| {
        use std::sync::atomic::Ordering::Relaxed;
        let c = t.counters();
        json!({
            "recorded": c.recorded.load(Relaxed),
            "exported": c.exported.load(Relaxed),
            "failed": c.failed.load(Relaxed),
            "dropped": c.dropped.load(Relaxed),
        })
    });
    Ok((
        StatusCode::OK,
        json!({
            "time_ms": time_ms as u64,
            "uptime_seconds": ctx.started.elapsed().as_secs_f64(),
            "duration_bounds_us": DURATION_BOUNDS_US,
            "requests": st.requests,
            "responses": st.responses,
            "timeouts": st.timeouts,
            "no_service": st.no_service,
            "late": st.late,
            "unavailable": st.unavailable,
            "requests_in_flight": reports.in_flight(),
            "services": services,
            "shards": views::per_shard(&reports),
            "shards_missing": reports.missing,
            "tracing": tracing,
        }),
    ))
}

/// `GET /v1/logs?after=SEQ`: the log lines after SEQ (0: all kept).
pub fn logs(query: Option<&str>) -> Answer {
    let mut after = 0;
    for (k, v) in query.unwrap_or("").split('&').filter_map(|kv| kv.split_once('=')) {
        if k == "after" {
            after = v.parse().map_err(|_| {
                ApiError::bad_request("invalid_request", format!("after: '{v}' is not a log sequence number"))
            })?;
        }
    }
    let (lines, last, missed) = recent_logs::since(after);
    Ok((StatusCode::OK, json!({ "lines": lines, "last_seq": last, "missed": missed })))
}
