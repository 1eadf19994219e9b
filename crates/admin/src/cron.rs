//! `GET /v1/cron`: every cron service's jobs (docs/CRON.md): schedule,
//! destination, next and last event, and what their events came to
//! (fired, ok, failed, missed, how late): the `Report`s of kind `cron`.

use super::reply::Answer;
use super::AdminContext;
use hyper::StatusCode;
use serde_json::json;

pub fn list(ctx: &AdminContext) -> Answer {
    let reports = ctx.core.borrow().reports().of_kind("cron");
    let services: Vec<_> = reports.iter().map(|r| r.view()).collect();
    Ok((StatusCode::OK, json!({ "cron": services })))
}
