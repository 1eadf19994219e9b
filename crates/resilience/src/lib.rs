//! cumulo's resiliency policies (docs/CONFIG.md, "Resiliency"), as
//! arithmetic the router calls on its hot path:
//! - [`Policies`]: which `[[policy]]` covers a name, the most specific
//!   destination pattern winning, remembered per name (bounded);
//! - [`Policy`], [`Retry`]: what a policy retries and how long to wait;
//! - [`Breaker`]: a circuit breaker's states (closed, open, half-open);
//! - [`Outlier`]: one instance's run of failures and its ejections.
//!
//! No I/O and no clock of its own: the caller passes `now` and a random
//! draw, so every rule is tested here with exact times.

mod breaker;
mod outlier;
mod policy;
mod statuses;
mod table;

pub use breaker::{Admission, Breaker, BreakerState};
pub use outlier::Outlier;
pub use policy::{BreakerSettings, OutlierSettings, Policy, Retry};
pub use statuses::StatusSet;
pub use table::{Policies, MAX_CACHED_NAMES};

#[cfg(test)]
mod tests;
