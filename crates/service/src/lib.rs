//! The service API: what a service built into the core sees of it.
//!
//! A service crate (the queue, and later the gateway and the others) depends
//! on this crate alone, and so reaches the core only through the calls an SDK
//! has (subscribe, send, return, forward), behind [`ServiceApi`]. The core
//! implements the trait for its internal instances; the service's code is
//! generic over it, so the same service runs against a test double in its
//! own crate's tests.
#![deny(unsafe_code)]

mod api;
mod error;
mod report;

pub use api::{Request, Response, SendOptions, ServiceApi};
pub use cumulo_proto::{info, Status, TransId};
/// Trace context and span records, for a service that records its own.
pub use cumulo_trace as trace;
pub use error::ServiceError;
pub use report::{Metric, MetricKind, Report, Reports};
