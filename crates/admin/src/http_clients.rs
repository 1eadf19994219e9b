//! `GET /v1/http-clients`: every `http_client` instance's requests by
//! outcome and its connection pool (docs/HTTP_CLIENT.md): the `Report`s of
//! kind `http_client`, as the service crate writes them.

use super::reply::Answer;
use super::AdminContext;
use hyper::StatusCode;
use serde_json::json;

pub fn list(ctx: &AdminContext) -> Answer {
    let reports = ctx.core.borrow().reports().of_kind("http_client");
    let clients: Vec<_> = reports.iter().map(|r| r.view()).collect();
    Ok((StatusCode::OK, json!({ "http_clients": clients })))
}
