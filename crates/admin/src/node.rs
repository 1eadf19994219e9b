//! This node as a whole: status, node list, subscriptions, log level.

use super::reply::{Answer, ApiError};
use super::{views, AdminContext};
use cumulo_router::Core;
use cumulo_router::InstanceId;
use hyper::StatusCode;
use serde_json::{json, Value};

/// This node, then the other nodes of the cloud (with `[cluster]`): state,
/// last heartbeat, node_id, subscriptions, requests in flight there.
pub fn nodes(ctx: &AdminContext) -> Answer {
    let core = ctx.core.borrow();
    let node_id = core.limits().node_id;
    let cluster = ctx.cluster.as_ref().map(|c| c.borrow());
    let mut nodes = vec![json!({
        "id": node_id,
        "name": cluster.as_ref().map(|c| c.me().to_string()),
        "state": "local",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": ctx.started.elapsed().as_secs_f64(),
        "started_at": views::unix_seconds(ctx.started_at),
        "local": true,
        "subscriptions": cluster.as_ref().map(|c| c.local_subscriptions()),
        "patterns": cluster.as_ref().map(|c| c.local_patterns()),
    })];
    let now = std::time::Instant::now();
    for m in cluster.iter().flat_map(|c| c.members()) {
        let inst = core.instance(&m.instance());
        nodes.push(json!({
            "id": m.node_id(),
            "name": m.name(),
            "state": "up",
            "local": false,
            "joined_at": views::unix_seconds(m.joined_at()),
            "last_heartbeat_ms_ago": now.saturating_duration_since(m.last_seen()).as_millis() as u64,
            "subscriptions": m.subscriptions(),
            "patterns": m.patterns(),
            "subscriptions_version": m.applied_version(),
            "requests_in_flight": inst.map_or(0, |i| i.in_flight()),
            "requests_queued": inst.map_or(0, |i| i.queued()),
            "requests_sent": m.metrics().received.get(),
            "answers": m.metrics().handled(),
        }));
    }
    let cloud = cluster.as_ref().map(|c| {
        json!({
            "name": c.cloud(), "node": c.me(), "servers": c.servers(), "connected": c.connected(),
            "max_payload": c.max_payload(), "nodes_left": c.left(), "nodes_purged": c.purged(),
            "messages_dropped": c.dropped_frames(),
        })
    });
    Ok((StatusCode::OK, json!({ "nodes": nodes, "cluster": cloud })))
}

pub async fn status(ctx: &AdminContext) -> Answer {
    let reports = views::reports(ctx).await;
    let services = ctx.supervisor.services();
    let mut by_status = serde_json::Map::new();
    for s in &services {
        let n = by_status.entry(s.status()).or_insert(json!(0));
        *n = json!(n.as_u64().unwrap_or(0) + 1);
    }
    let core = ctx.core.borrow();
    let st = &reports.stats();
    Ok((
        StatusCode::OK,
        json!({
            "node_id": core.limits().node_id,
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_seconds": ctx.started.elapsed().as_secs_f64(),
            "shutting_down": core.is_shutting_down(),
            "log_level": ctx.log.current(),
            "services": { "total": services.len(), "by_status": by_status },
            "processes": core.process_count(),
            "instances": reports.connections(),
            "subscriptions": core.registry().patterns().count(),
            "requests_in_flight": reports.in_flight(),
            "requests_queued": reports.queued(),
            "totals": {
                "requests": st.requests, "responses": st.responses, "forwards": st.forwards,
                "timeouts": st.timeouts, "no_service": st.no_service,
                "unavailable": st.unavailable, "queue_full": st.queue_full,
                "crashed": st.crashed, "late": st.late, "protocol_errors": st.protocol_errors,
                "slow_consumers": st.slow_consumers, "unauthorized": st.unauthorized, "denied": st.denied,
            },
            "threads": core.shard().count,
            "shards": views::per_shard(&reports),
            "shards_missing": reports.missing,
        }),
    ))
}

/// Every subscribed pattern with the instances serving it (a pattern
/// subscribed twice by one instance lists it twice: it gets twice the share).
pub fn subscriptions(ctx: &AdminContext) -> Answer {
    let core = ctx.core.borrow();
    // Another shard's instances are one pseudo-instance here: they are
    // listed by what that shard replicated of each (`shards::mirror`), with
    // their process from shard 0's slots.
    let shard_of = |id: &InstanceId| ctx.shards.as_ref().and_then(|s| s.pseudo.iter().position(|p| p == id && *p != 0));
    let mut all: Vec<Value> = core
        .registry()
        .patterns()
        .map(|e| {
            let mut instances: Vec<Value> = Vec::with_capacity(e.instances.len());
            let mut listed_shards = Vec::new();
            for id in &e.instances {
                if let Some(shard) = shard_of(id) {
                    if !listed_shards.contains(&shard) {
                        listed_shards.push(shard);
                        let held = core.mirror(id).into_iter().flat_map(|m| m.holders(&e.pattern));
                        for (there, count) in held {
                            let entry = elsewhere(&core, there, shard);
                            instances.extend(std::iter::repeat_n(entry, count as usize));
                        }
                    }
                    continue;
                }
                let inst = core.instance(id);
                let origin = inst.and_then(|i| i.origin());
                instances.push(json!({
                    "instance_id": id,
                    "service_id": origin.map(|o| o.service),
                    "process_index": origin.map(|o| o.process_index),
                    "label": inst.map(|i| i.label()),
                    "shard": core.shard().index,
                }));
            }
            json!({ "pattern": &*e.pattern, "instances": instances })
        })
        .collect();
    all.sort_by(|a, b| a["pattern"].as_str().cmp(&b["pattern"].as_str()));
    Ok((StatusCode::OK, json!({ "subscriptions": all })))
}

/// An instance another shard serves, as shard 0's process slots know it
/// (a managed process's thread), or by its id alone (that shard's gateway
/// instances).
fn elsewhere(core: &Core, id: InstanceId, shard: usize) -> Value {
    let slot = core.processes().find_map(|s| s.threads.iter().position(|t| *t == Some(id)).map(|t| (s, t)));
    match slot {
        Some((s, thread)) => json!({
            "instance_id": id,
            "service_id": s.service,
            "process_index": s.process_index,
            "label": format!("{} process {} thread {thread}", s.prefix, s.process_index),
            "shard": shard,
        }),
        None => json!({
            "instance_id": id,
            "service_id": null,
            "process_index": null,
            "label": format!("instance {id} on shard {shard}"),
            "shard": shard,
        }),
    }
}

pub fn get_log_level(ctx: &AdminContext) -> Answer {
    Ok((StatusCode::OK, json!({ "level": ctx.log.current() })))
}

pub fn set_log_level(ctx: &AdminContext, body: &[u8]) -> Answer {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        level: String,
    }
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request("invalid_json", format!("expected {{\"level\": \"debug\"}}: {e}")))?;
    let previous = ctx.log.set(&b.level).map_err(|e| ApiError::bad_request("invalid_log_level", e))?;
    tracing::info!("log level changed from '{previous}' to '{}'", b.level);
    Ok((StatusCode::OK, json!({ "level": b.level, "previous": previous })))
}
