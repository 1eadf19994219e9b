//! `GET /v1/reports`: what the services built on the core publish
//! (`cumulo-service`'s `Report`: the tcp and udp bridges' counters, the
//! queues' state, ...), each with its kind and id; `?kind=bridge` keeps one
//! kind. The reports of the instances shard 0 runs (every internal service
//! but the HTTP gateway runs there).

use super::reply::Answer;
use super::AdminContext;
use hyper::StatusCode;
use serde_json::json;

pub fn list(ctx: &AdminContext, query: Option<&str>) -> Answer {
    let kind = query.unwrap_or("").split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == "kind");
    // Taken out first: a report's view borrows its service, not the core.
    let all = match kind {
        Some((_, k)) => ctx.core.borrow().reports().of_kind(k),
        None => ctx.core.borrow().reports().all(),
    };
    let reports: Vec<_> = all.iter().map(|r| json!({ "kind": r.kind(), "id": r.id(), "view": r.view() })).collect();
    Ok((StatusCode::OK, json!({ "reports": reports })))
}
