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
//! The `[cluster]` section is cumulo-config's (`cluster.rs`).
//!
//! - `wire`: subjects, control messages, the data header, batching;
//! - `members`: the other nodes, their pseudo-instances and subscriptions;
//! - `link`: the NATS connection and the cluster task;
//! - `metrics`: per-node series of `GET /metrics`.
//!
//! Without `[cluster]` none of this runs and no NATS is needed.

mod link;
mod members;
mod metrics;
mod wire;

pub use link::{start, Cluster};
pub use members::{
    Member, Membership, MAX_NODES, MAX_REMOTE_PATTERNS, MAX_REMOTE_PATTERN_LEN, MAX_REMOTE_SUBSCRIPTIONS,
};
pub use metrics::render as render_metrics;

#[cfg(test)]
mod tests;
