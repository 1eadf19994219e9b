//! Services as the admin API shows them (JSON).

use crate::instance::ServiceId;
use crate::state::Core;
use crate::supervisor::Service;
use serde_json::{json, Value};

/// Instances connected and requests queued at them, per service; `None`
/// gathers unmanaged instances. One pass over the instances.
pub fn load_by_service(core: &Core) -> ahash::AHashMap<Option<ServiceId>, (u64, u64)> {
    let mut m: ahash::AHashMap<Option<ServiceId>, (u64, u64)> = ahash::AHashMap::new();
    for inst in core.instances.values().filter(|i| !i.endpoint.is_pseudo()) {
        let e = m.entry(inst.origin.as_ref().map(|o| o.service)).or_default();
        e.0 += 1;
        e.1 += inst.queue.len() as u64;
    }
    // Instances another shard serves (their queues are counted there).
    for &(_, service) in core.handoff.shard_of.values() {
        m.entry(Some(service)).or_default().0 += 1;
    }
    m
}

fn program(svc: &Service) -> String {
    let c = svc.config();
    match (&c.internal, &c.path) {
        (Some(name), _) => name.clone(),
        (_, Some(path)) if c.args.is_empty() => path.clone(),
        (_, Some(path)) => format!("{path} {}", c.args.join(" ")),
        _ => String::new(),
    }
}

/// The summary `GET /v1/services` lists.
pub fn summary(svc: &Service, load: (u64, u64)) -> Value {
    let c = svc.config();
    json!({
        "id": svc.id,
        "prefix": &*svc.prefix,
        "kind": if c.internal.is_some() { "internal" } else { "external" },
        "program": program(svc),
        "status": svc.status(),
        "count_process": c.count_process,
        "count_thread": c.count_thread,
        "instances": load.0,
        "queued": load.1,
        "restarts": svc.restarts(),
        "process_restarts": svc.slots().iter().map(|s| s.state().generation.saturating_sub(1)).sum::<u64>(),
        "requests_handled": svc.metrics.handled(),
    })
}

/// Everything about one service: the summary, its processes, its counters
/// and its configuration.
pub fn detail(core: &Core, svc: &Service, load: (u64, u64)) -> Value {
    let mut v = summary(svc, load);
    let processes: Vec<Value> = svc
        .slots()
        .iter()
        .map(|s| {
            json!({
                "index": s.index,
                "state": s.state().state.name(),
                "pid": s.pid.get(),
                "instances": s.instances(core).len(),
                "restarts": s.restarts.get(),
                "shards": s.shards(core),
            })
        })
        .collect();
    let m = &svc.metrics;
    v["processes"] = processes.into();
    v["requests"] = json!({
        "received": m.received.get(),
        "sent": m.sent.get(),
        "handled": m.handled(),
        "errors": m.errors.iter().map(|c| c.get()).sum::<u64>(),
        "timeouts": m.timeouts(),
    });
    v["added_at"] = unix_seconds(svc.added).into();
    v["config"] = serde_json::to_value(&*svc.config()).unwrap_or_default();
    v
}

pub fn unix_seconds(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
