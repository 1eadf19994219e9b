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
//! - `rules`: CloudI's routing rules for CloudI-protocol senders;
//! - `availability`: what a request for a name nothing subscribes gets,
//!   by the state of the configured service that covers it;
//! - `resilience`: retries, circuit breakers, timeouts and outlier
//!   ejection by `[[policy]]` (the rules are in `cumulo_resilience`);
//! - `health`: probes of the instances of services with
//!   `[service.health]`, and those out of selection for failing them;
//! - `call_spans`: the spans of requests routed here, when `[tracing]`
//!   is on (`cumulo_trace` records them; the node exports them);
//! - `trust`: named clients, send rules (dest_list_allow / deny) and what
//!   an instance without a token may claim.
//!
//! No HTTP, NATS or WebSocket library reaches this crate: its manifest and
//! `core/tests/architecture.rs` say so.

mod availability;
mod call_spans;
mod close_reason;
mod error;
pub mod frames;
mod health;
mod held;
mod instance;
mod metrics;
mod queue;
mod registry;
mod remote;
mod resilience;
mod routing;
mod rules;
pub mod shards;
mod state;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
mod timeouts;
mod trust;

pub use availability::{Availability, ServiceLive, SlotPhase};
pub use close_reason::CloseReason;
pub use cumulo_resilience::BreakerState;
pub use error::RouteError;
pub use health::HealthReport;
pub use instance::{Endpoint, Instance, InternalInbox, Outbox, OwnedRequest, Response, ServiceId};
pub use metrics::{bump, ProcessUsage, PromText, ServiceCounts, ServiceMetrics, Stats, DURATION_BOUNDS_US};
pub use registry::InstanceId;
pub use remote::accept_remote;
pub use resilience::{BreakerReport, EjectedReport, ResilienceReport, ResilienceStats, TargetCounts, MAX_COPY_BYTES};
pub use state::{Accepted, Core, Limits, ProcessSlot, ShardIndex, Shared, HUNG_AFTER_ROUNDS};
/// Timer entries allowed beyond twice the requests in flight (see `timeouts`).
pub use timeouts::SLACK as TIMER_SLACK;
pub use trust::{Clients, Via};
