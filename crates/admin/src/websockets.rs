//! `GET /v1/websockets` and `DELETE /v1/websockets/{id}`: the HTTP
//! gateways' WebSocket connections, per path, and closing one.

use super::reply::{Answer, ApiError};
use super::AdminContext;
use cumulo_gateway::CloseReason;
use hyper::StatusCode;

pub fn list(_: &AdminContext) -> Answer {
    Ok((StatusCode::OK, cumulo_gateway::websocket_table().to_json()))
}

/// Asks the connection to close (code 1000, "closed by the operator"); it
/// is gone from the list once its close frame is written.
pub fn close(_: &AdminContext, id: Option<&str>) -> Answer {
    let id = id.unwrap_or_default();
    let not_found =
        || ApiError::not_found(format!("no open WebSocket connection with id '{id}' (see GET /v1/websockets)"));
    let n: u64 = id.parse().map_err(|_| not_found())?;
    let table = cumulo_gateway::websocket_table();
    let entry = table.get(n).ok_or_else(not_found)?;
    entry.close(CloseReason::Admin);
    Ok((StatusCode::ACCEPTED, serde_json::json!({ "id": n, "name": entry.name, "closing": true })))
}
