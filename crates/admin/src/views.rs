//! Services as the admin API shows them (JSON).

use super::AdminContext;
use cumulo_node::shards::report::{self, Reports, ServiceReport};
use cumulo_node::supervisor::Service;
use cumulo_router::Core;
use serde_json::{json, Value};

/// Every shard's counters and instances (shards/report.rs): this shard's
/// read now, the others' asked for (with `core.threads` = 1, this shard's
/// only). Holds no borrow across the wait.
pub async fn reports(ctx: &AdminContext) -> Reports {
    let mine = {
        let services: Vec<_> = ctx.supervisor.services().iter().map(|s| (s.id, s.metrics.clone())).collect();
        // Breakers and ejections are reported as of now, not as of the
        // last event.
        ctx.core.borrow_mut().refresh_now();
        let core = ctx.core.borrow();
        report::snapshot(&core, core.shard().index, &services)
    };
    match &ctx.shards {
        Some(links) => links.reports.gather(mine, report::REPORT_TIMEOUT).await,
        None => Reports { shards: vec![mine], missing: Vec::new() },
    }
}

/// Each shard's share, for an operator to see how the load spreads.
pub fn per_shard(reports: &Reports) -> Value {
    let shards: Vec<Value> = reports
        .shards
        .iter()
        .map(|r| {
            json!({
                "shard": r.shard,
                "requests": r.stats.requests,
                "responses": r.stats.responses,
                "timeouts": r.stats.timeouts,
                "requests_in_flight": r.in_flight,
                "requests_queued": r.queued,
                "instances": r.connections,
            })
        })
        .collect();
    shards.into()
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
pub fn summary(svc: &Service, load: &ServiceReport) -> Value {
    let c = svc.config();
    json!({
        "id": svc.id,
        "prefix": &*svc.prefix,
        "kind": if c.internal.is_some() { "internal" } else { "external" },
        "program": program(svc),
        "status": svc.status(),
        "count_process": c.count_process,
        "count_thread": c.count_thread,
        "instances": load.instances,
        "queued": load.queued,
        "restarts": svc.restarts(),
        "process_restarts": svc.slots().iter().map(|s| s.state().generation.saturating_sub(1)).sum::<u64>(),
        "requests_handled": load.counts.handled(),
    })
}

/// Everything about one service: the summary, its processes, its counters
/// and its configuration.
pub fn detail(core: &Core, svc: &Service, load: &ServiceReport) -> Value {
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
    let m = &load.counts;
    v["processes"] = processes.into();
    v["requests"] = json!({
        "received": m.received,
        "sent": m.sent,
        "handled": m.handled(),
        "errors": m.failed(),
        "timeouts": m.timeouts(),
    });
    v["added_at"] = unix_seconds(svc.added).into();
    v["config"] = serde_json::to_value(&*svc.config()).unwrap_or_default();
    v
}

pub fn unix_seconds(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
