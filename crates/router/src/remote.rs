//! Requests that arrive through a pseudo-instance: from another node of the
//! cloud or another shard of this process. The node that sent one keeps its
//! entry and timer; here it is a new request, routed to a local instance,
//! unless it is one this side sent there coming back.

use crate::call_spans::{Call, Facts};
use crate::registry::InstanceId;
use crate::routing::Route;
use crate::state::Core;
use cumulo_proto::{Request, Status};
use std::time::Duration;

/// A REQUEST from another node (through its pseudo-instance `from`): a new
/// request here, routed to a local instance only (the pseudo-instance's
/// dest_refresh), with the time the sender had left.
pub fn accept_remote(core: &mut Core, from: InstanceId, r: &Request<'_>) {
    if core.inflight.get(&r.trans_id).is_some_and(|f| f.dest == from) {
        return come_back(core, from, r);
    }
    if core.inflight.contains_key(&r.trans_id) {
        let msg = format!("trans_id {} is already in flight on this node", r.trans_id);
        return core.respond(from, &r.trans_id, Status::Malformed, b"", msg.as_bytes());
    }
    if core.shutting_down {
        return core.respond(from, &r.trans_id, Status::ShuttingDown, b"", b"the node is shutting down");
    }
    core.stats.requests += 1;
    if let Some(i) = core.instances.get(&from) {
        crate::metrics::bump(&i.metrics.sent);
    }
    let timeout = r.timeout.max(1);
    // A request from another node (not another shard: the shard that
    // accepted it has its span) is a SERVER span here when traced.
    let from_node =
        matches!(core.instances.get(&from).map(|i| &i.endpoint), Some(crate::instance::Endpoint::Remote(_)));
    let began = core.spans.as_deref().filter(|_| from_node).and_then(|spans| {
        let facts =
            Facts { call: Call::FromNode, name: r.name, timeout_ms: timeout, priority: r.priority, now: core.now };
        spans.begin(r.trans_id, r.request_info, &facts)
    });
    let route = Route {
        trans_id: r.trans_id,
        sender: from,
        deadline: core.now + Duration::from_millis(timeout as u64),
        priority: r.priority,
        flags: r.flags,
        wait_for_service: false,
        name: r.name,
        request_info: began.as_deref().unwrap_or(r.request_info),
        request: r.request,
        via: None,
        target: 0,
        avoid: 0,
        attempt: 0,
    };
    let route = match core.instances.get(&from).map(|i| &i.endpoint) {
        // A multicast copy, or a request another shard gave one instance
        // here in turn (`shards::turns`): its source names the instance
        // (`shards::mirror`), served by the pattern it was chosen for.
        Some(crate::instance::Endpoint::Shard(_)) if r.flags & cumulo_proto::REQUEST_MCAST != 0 || r.source != 0 => {
            Route { via: Some(r.pattern), target: r.source as InstanceId, ..route }
        }
        _ => route,
    };
    core.route(&route, false, timeout);
}

/// A request this side sent to `from`, forwarded (or re-routed) back here:
/// it goes on from here as a forward, under the entry and timer it already
/// has. The other side kept no entry for it when it sent it back
/// (`Core::route`, "handed back"), so nothing is answered to it: an answer
/// would cross a second copy of the request sent there meanwhile and be
/// taken for that copy's answer.
fn come_back(core: &mut Core, from: InstanceId, r: &Request<'_>) {
    if let Some(inst) = core.instances.get_mut(&from) {
        if let Some(i) = inst.delivered.iter().position(|t| *t == r.trans_id) {
            inst.delivered.swap_remove(i);
        }
    }
    let Some(f) = core.inflight.get(&r.trans_id) else { return };
    let route = Route {
        trans_id: r.trans_id,
        sender: f.sender,
        deadline: f.deadline,
        priority: r.priority,
        flags: f.flags,
        wait_for_service: false,
        name: r.name,
        request_info: r.request_info,
        request: r.request,
        via: None,
        target: 0,
        // The side that sent it back had no instance for it, or
        // forwarded it here: it is routed on from here, not back there.
        avoid: from,
        attempt: 0,
    };
    let timeout = f.timeout_ms;
    core.stats.forwards += 1;
    core.route(&route, true, timeout);
    core.pump(from);
}
