//! Nodes of one cloud over NATS (docs/CLUSTER.md).
//!
//! Each remote node is a pseudo-instance in the local core
//! (`Endpoint::Remote`), subscribed to that node's patterns once per remote
//! instance: routing picks among local instances and remote nodes with the
//! same code, and a request to a remote node is the same REQUEST frame a
//! socket would get, published to that node's subject. The receiving node
//! routes it to one of its own instances as a request from the sender's
//! pseudo-instance; the answer goes back as a RESPONSE and ends the request
//! on the sender's node as any answer does. The sender's node owns the
//! timeout.
//!
//! - `config`: the `[cluster]` section;
//! - `wire`: subjects, control messages, the data header, batching;
//! - `members`: the other nodes, their pseudo-instances and subscriptions;
//! - `link`: the NATS connection and the cluster task.
//!
//! Without `[cluster]` none of this runs and no NATS is needed.

pub mod config;
pub mod link;
pub mod members;
pub mod wire;

pub use link::Cluster;
pub use members::Membership;

use crate::registry::InstanceId;
use crate::routing::Route;
use crate::state::Core;
use cumulo_proto::{Request, Status};
use std::time::Duration;

/// A REQUEST from another node (through its pseudo-instance `from`): a new
/// request here, routed to a local instance only (the pseudo-instance's
/// dest_refresh), with the time the sender had left.
pub fn accept_remote(core: &mut Core, from: InstanceId, r: &Request<'_>) {
    if core.inflight.contains_key(&r.trans_id) {
        let msg = format!("trans_id {} is already in flight on this node", r.trans_id);
        return core.respond(from, &r.trans_id, Status::Malformed, b"", msg.as_bytes());
    }
    if core.shutting_down {
        return core.respond(from, &r.trans_id, Status::ShuttingDown, b"", b"the node is shutting down");
    }
    core.stats.requests += 1;
    let timeout = r.timeout.max(1);
    let route = Route {
        trans_id: r.trans_id,
        sender: from,
        deadline: core.now + Duration::from_millis(timeout as u64),
        priority: r.priority,
        flags: r.flags,
        wait_for_service: false,
        name: r.name,
        request_info: r.request_info,
        request: r.request,
    };
    core.route(&route, false, timeout);
}
