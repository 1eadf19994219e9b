//! `GET /v1/queues`: every queue service's state (depth, in flight,
//! delivered, redelivered, dead letters, bytes on disk, oldest age);
//! `GET /v1/queues/dead-letters`, `POST /v1/queues/replay` and
//! `POST /v1/queues/purge` act on one queue's dead letters, named by
//! `?queue=<prefix>` (optional when there is one queue).

use super::reply::{Answer, ApiError};
use super::AdminContext;
use hyper::StatusCode;
use serde_json::json;
use std::rc::Rc;

pub fn list(ctx: &AdminContext) -> Answer {
    let reports = ctx.core.borrow().reports().of_kind("queue");
    let queues: Vec<_> = reports.iter().map(|r| r.view()).collect();
    Ok((StatusCode::OK, json!({ "queues": queues })))
}

/// `dead_letters` (with `?limit=`), `purge` or `replay` on one queue.
pub fn operate(ctx: &AdminContext, op: &str, query: Option<&str>) -> Answer {
    let mut queue = None;
    let mut args = json!({});
    for (k, v) in query.unwrap_or("").split('&').filter_map(|kv| kv.split_once('=')) {
        let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy().to_string();
        match k {
            "queue" => queue = Some(v),
            "limit" => {
                let n: u64 = v
                    .parse()
                    .map_err(|_| ApiError::bad_request("invalid_request", format!("limit: '{v}' is not a number")))?;
                args["limit"] = n.into();
            }
            _ => {}
        }
    }
    let report = find(ctx, queue.as_deref())?;
    let value = report.operate(op, &args).map_err(|e| ApiError::bad_request("invalid_request", e.why()))?;
    Ok((StatusCode::OK, value))
}

fn find(ctx: &AdminContext, queue: Option<&str>) -> Result<Rc<dyn cumulo_service::Report>, ApiError> {
    let reports = ctx.core.borrow().reports().of_kind("queue");
    let known = || reports.iter().map(|r| r.id()).collect::<Vec<_>>().join(", ");
    match queue {
        Some(q) => reports
            .iter()
            .find(|r| r.id() == q)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no queue with prefix '{q}' (queues: {})", known()))),
        None if reports.len() == 1 => Ok(reports[0].clone()),
        None if reports.is_empty() => Err(ApiError::not_found("no queue service is running")),
        None => Err(ApiError::bad_request(
            "invalid_request",
            format!("several queues run: name one with ?queue=<prefix> ({})", known()),
        )),
    }
}
