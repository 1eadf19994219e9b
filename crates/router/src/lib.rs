//! cumulo's router: the hot path of the core. Instances and the registry of
//! what they subscribe, requests in flight and their timers, the queues of
//! instances and of requests waiting for a subscriber, and the routing
//! between them. Other nodes of a cloud and other shards of this process are
//! pseudo-instances here: the router writes their frames to an outbox like
//! any instance's, and the node carries them (over NATS, over a channel).
//!
//! - `state`: the core's state on one event-loop thread (`Core`);
//! - `routing`: choosing an instance, queueing, delivering, answering;
//! - `instance`: one connection's identity, window, queue and outbox;
//! - `held`, `queue`: requests queued at an instance or parked for a
//!   subscriber, and what they weigh;
//! - `timeouts`: when requests in flight fall due;
//! - `registry`: who subscribes what;
//! - `frames`: every frame the core writes, one encoder per kind;
//! - `metrics`, `close_reason`: counters and why connections end;
//! - `shards`: the router's side of the core on several threads;
//! - `remote`: requests that arrive through a pseudo-instance;
//! - `rules`: CloudI's routing rules for CloudI-protocol senders.
//!
//! No HTTP, NATS or WebSocket library reaches this crate: its manifest and
//! `core/tests/architecture.rs` say so.

pub mod close_reason;
mod error;
pub mod frames;
pub mod held;
pub mod instance;
pub mod metrics;
pub mod queue;
pub mod registry;
mod remote;
pub mod routing;
pub mod rules;
pub mod shards;
pub mod state;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod timeouts;

pub use error::RouteError;
pub use remote::accept_remote;
