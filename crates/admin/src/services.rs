//! `/v1/services`: list, add, show, change, restart and remove services.

use super::reply::{Answer, ApiError};
use super::{service_id, views, AdminContext};
use cumulo_node::supervisor::ServiceChanges;
use hyper::StatusCode;
use serde_json::{json, Value};
use std::rc::Rc;

pub async fn list(ctx: &AdminContext) -> Answer {
    let reports = views::reports(ctx).await;
    let all: Vec<Value> =
        ctx.supervisor.services().iter().map(|s| views::summary(s, &reports.service(Some(s.id)))).collect();
    Ok((StatusCode::OK, json!({ "services": all, "shards_missing": reports.missing })))
}

pub async fn get(ctx: &AdminContext, id: Option<&str>) -> Answer {
    let id = service_id(id)?;
    ctx.supervisor.get(id)?;
    let reports = views::reports(ctx).await;
    // Looked up again: it may have been removed during the wait.
    let svc = ctx.supervisor.get(id)?;
    let core = ctx.core.borrow();
    let mut v = views::detail(&core, &svc, &reports.service(Some(id)));
    v["shards_missing"] = json!(reports.missing);
    Ok((StatusCode::OK, v))
}

/// One service or a list, checked as the config file is: all are added or
/// none.
pub fn add(ctx: &AdminContext, body: &[u8]) -> Answer {
    if ctx.core.borrow().is_shutting_down() {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the core is shutting down"));
    }
    // Syntax first, so that "this is not JSON" gets its own code
    // (invalid_json), apart from a service that fails validation.
    serde_json::from_slice::<serde::de::IgnoredAny>(body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("not valid JSON: {e}")))?;
    let services =
        cumulo_config::services_from_json(body, cumulo_node::catalogue::checks(), ctx.supervisor.acl_groups())
            .map_err(|(field, reason)| ApiError::invalid(field, reason))?;
    let added: Vec<Value> = services
        .into_iter()
        .map(|s| {
            let prefix = s.prefix.clone();
            json!({ "id": ctx.supervisor.add(s), "prefix": prefix })
        })
        .collect();
    let ids: Vec<Value> = added.iter().map(|a| a["id"].clone()).collect();
    Ok((StatusCode::CREATED, json!({ "ids": ids, "services": added })))
}

pub async fn update(ctx: &AdminContext, id: Option<&str>, body: &[u8]) -> Answer {
    let id = service_id(id)?;
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("not valid JSON: {e}")))?;
    let Some(fields) = value.as_object() else {
        return Err(ApiError::bad_request("invalid_json", "expected an object of options to change"));
    };
    if fields.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("nothing to change: give one of {}", ServiceChanges::FIELDS.join(", ")),
        ));
    }
    if let Some(k) = fields.keys().find(|k| !ServiceChanges::FIELDS.contains(&k.as_str())) {
        let known_key =
            serde_json::to_value(cumulo_config::ServiceConfig::default()).ok().is_some_and(|d| d.get(k).is_some());
        let why = if known_key {
            "cannot change while the service runs: remove the service and add it again".to_string()
        } else {
            "unknown option".to_string()
        };
        return Err(ApiError::invalid(
            k.clone(),
            format!("{why} (live options: {})", ServiceChanges::FIELDS.join(", ")),
        ));
    }
    let changes: ServiceChanges =
        serde_json::from_value(value).map_err(|e| ApiError::invalid(String::new(), e.to_string()))?;
    ctx.supervisor.update(id, &changes)?;
    get(ctx, Some(&id.to_string())).await
}

pub async fn restart(ctx: &AdminContext, id: Option<&str>) -> Answer {
    let id = service_id(id)?;
    ctx.supervisor.restart(id)?;
    let (status, body) = get(ctx, Some(&id.to_string())).await?;
    debug_assert_eq!(status, StatusCode::OK);
    Ok((StatusCode::ACCEPTED, body))
}

/// Returns once its processes have stopped.
pub async fn remove(ctx: &Rc<AdminContext>, id: Option<&str>) -> Answer {
    let id = service_id(id)?;
    let svc = ctx.supervisor.get(id)?;
    let processes = svc.slots().len();
    ctx.supervisor.remove(id).await?;
    Ok((
        StatusCode::OK,
        json!({ "id": id, "prefix": &*svc.prefix, "status": "removed", "processes_stopped": processes }),
    ))
}

/// `POST /v1/reload`: the core's config file applied again (reload.rs);
/// with `dry_run=true`, only what it would do. Nothing changes when the
/// file is invalid or changes what needs a restart.
pub async fn reload(ctx: &AdminContext, query: Option<&str>) -> Answer {
    use crate::reload::ReloadError;
    let dry_run = query.is_some_and(|q| q.split('&').any(|kv| kv == "dry_run=true" || kv == "dry_run=1"));
    let result = if dry_run { ctx.reloader.plan() } else { ctx.reloader.reload().await };
    match result {
        Ok(plan) => {
            let mut v = serde_json::to_value(&plan).unwrap_or_default();
            v["applied"] = json!(!dry_run);
            Ok((StatusCode::OK, v))
        }
        Err(e) => {
            let (status, code) = match e {
                ReloadError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid_config"),
                ReloadError::NeedsRestart(_) => (StatusCode::CONFLICT, "needs_restart"),
                ReloadError::NoFile => (StatusCode::CONFLICT, "no_config_file"),
                ReloadError::Busy => (StatusCode::CONFLICT, "busy"),
            };
            Err(ApiError::new(status, code, e.to_string()))
        }
    }
}
