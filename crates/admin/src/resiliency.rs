//! `GET /v1/resiliency`: the policies in force, their counters summed over
//! the shards, every breaker and ejected instance (each shard keeps its
//! own); `PUT /v1/resiliency/policies` replaces the policies on every shard;
//! `POST /v1/resiliency/breakers/reset` closes breakers by hand.

use super::reply::{Answer, ApiError};
use super::{views, AdminContext};
use cumulo_node::shards::policies;
use cumulo_node::shards::report::ResilienceTotals;
use hyper::StatusCode;
use serde_json::{json, Value};

pub async fn get(ctx: &AdminContext) -> Answer {
    // One shard, with no policy and no instance probed: nothing to show.
    // With more, the others are asked even then: an instance probed for its
    // health may be served by any shard.
    let alone = ctx.shards.is_none();
    if alone && !ctx.core.borrow().has_policies() && ctx.core.borrow().health_report().is_none() {
        let none = ResilienceTotals::default();
        let mut v = view(&none);
        v["policies"] = json!([]);
        v["missing_shards"] = json!([]);
        return Ok((StatusCode::OK, v));
    }
    let reports = views::reports(ctx).await;
    let totals = reports.resilience().unwrap_or_default();
    let mut v = view(&totals);
    v["policies"] = policies_json(ctx);
    v["missing_shards"] = json!(reports.missing);
    Ok((StatusCode::OK, v))
}

/// The policies shard 0 runs: every shard runs the same.
fn policies_json(ctx: &AdminContext) -> Value {
    serde_json::to_value(ctx.core.borrow().policies()).unwrap_or_default()
}

/// The counters, breakers and ejected instances as the API shows them.
pub fn view(t: &ResilienceTotals) -> Value {
    let s = &t.stats;
    let breakers: Vec<Value> = t
        .breakers
        .iter()
        .map(|(shard, b)| {
            json!({
                "policy": b.policy,
                "pattern": b.pattern,
                "state": b.state.name(),
                "consecutive_failures": b.consecutive_failures,
                "opens_in_ms": b.opens_in_ms,
                "trips": b.trips,
                "refused": b.refused,
                "attempts": b.counts.attempts,
                "retries": b.counts.retries,
                "failures": b.counts.failures,
                "shard": shard,
            })
        })
        .collect();
    let ejected: Vec<Value> = t
        .ejected
        .iter()
        .map(|(shard, e)| {
            json!({
                "instance": e.instance,
                "label": e.label,
                "back_in_ms": e.back_in_ms,
                "ejections": e.ejections,
                "why": e.why,
                "shard": shard,
            })
        })
        .collect();
    json!({
        "stats": {
            "retries": s.retries,
            "recovered": s.recovered,
            "gave_up": s.gave_up,
            "refused": s.refused,
            "trips": s.trips,
            "ejections": s.ejections,
            "uncopied": s.uncopied,
        },
        "breakers": breakers,
        "ejected": ejected,
        "waiting": t.waiting,
    })
}

/// Replaces the policies with the body's (checked first: a wrong one
/// changes nothing) on every shard; answers the new list.
pub async fn set(ctx: &AdminContext, body: &[u8]) -> Answer {
    let new = cumulo_config::policy::from_json(body).map_err(|(field, reason)| invalid_policy(field, reason))?;
    let count = new.len();
    let missing = policies::set_everywhere(&ctx.core, ctx.shards.as_deref(), new).await;
    tracing::info!("policies replaced through the admin API: {count} policies");
    warn_missing(&missing, "apply the new policies");
    Ok((StatusCode::OK, json!({ "policies": policies_json(ctx), "missing_shards": missing })))
}

fn invalid_policy(field: String, reason: String) -> ApiError {
    let mut e = ApiError::invalid(field, reason);
    e.code = "invalid_policy";
    e
}

/// Closes the breakers `?policy=` and `?pattern=` name (every one when
/// neither does) on every shard; answers how many were not closed.
pub async fn reset(ctx: &AdminContext, query: Option<&str>) -> Answer {
    let (mut policy, mut pattern) = (None, None);
    for (k, v) in query.unwrap_or("").split('&').filter_map(|kv| kv.split_once('=')) {
        let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy().to_string();
        match k {
            "policy" => policy = Some(v),
            "pattern" => pattern = Some(v),
            _ => {}
        }
    }
    let (n, missing) =
        policies::reset_everywhere(&ctx.core, ctx.shards.as_deref(), policy.as_deref(), pattern.as_deref()).await;
    let which = |what: &Option<String>| what.as_deref().map_or("any".to_string(), |w| format!("'{w}'"));
    tracing::info!(
        "breakers reset through the admin API (policy {}, pattern {}): {n} were open or half-open",
        which(&policy),
        which(&pattern)
    );
    warn_missing(&missing, "reset their breakers");
    Ok((StatusCode::OK, json!({ "reset": n, "missing_shards": missing })))
}

fn warn_missing(missing: &[u32], what: &str) {
    if !missing.is_empty() {
        tracing::warn!(
            "shards {missing:?} did not confirm in time that they {what}: far behind, they do when they get to it"
        );
    }
}
