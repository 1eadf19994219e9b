//! One policy as the router applies it, built from its `[[policy]]` table.

use crate::statuses::StatusSet;
use cumulo_config::policy::{parse_statuses, Backoff, PolicyConfig};
use cumulo_proto::Status;
use std::time::Duration;

#[derive(Debug)]
pub struct Policy {
    /// Its place in the list: breakers and counters are kept per policy.
    pub index: u32,
    pub name: String,
    /// A request's timeout to these destinations at most (None: the
    /// caller's).
    pub timeout: Option<Duration>,
    pub retry: Option<Retry>,
    pub breaker: Option<BreakerSettings>,
    pub outlier: Option<OutlierSettings>,
    /// What it was built from, for the admin API.
    pub config: PolicyConfig,
}

#[derive(Debug)]
pub struct Retry {
    pub max_retries: u32,
    pub backoff: Backoff,
    pub interval: Duration,
    pub max_interval: Duration,
    pub jitter: f64,
    pub on: StatusSet,
    pub attempt_timeout: Option<Duration>,
    /// Whether `on` names a status that can come after delivery.
    after_delivery: bool,
}

#[derive(Debug)]
pub struct BreakerSettings {
    pub consecutive_failures: u32,
    pub failure_ratio: f64,
    pub window: u32,
    pub open: Duration,
    pub half_open_requests: u32,
    pub failures: StatusSet,
}

#[derive(Debug)]
pub struct OutlierSettings {
    pub consecutive_failures: u32,
    pub ejection: Duration,
    pub max_ejection: Duration,
    pub max_ejected_share: f64,
    pub failures: StatusSet,
}

/// Statuses that may come after the request reached a service: retrying
/// them needs a copy of the request kept while it is out.
const AFTER_DELIVERY: &[Status] =
    &[Status::Timeout, Status::Crashed, Status::ServiceError, Status::Unavailable, Status::ShuttingDown];

fn statuses(names: &[String]) -> StatusSet {
    // Checked when the file (or the admin API's body) was read.
    StatusSet::of(&parse_statuses(names).unwrap_or_default())
}

fn ms(n: u32) -> Duration {
    Duration::from_millis(n as u64)
}

impl Policy {
    /// The policy of a checked `[[policy]]` table (`cumulo_config::policy::validate`).
    pub fn new(index: u32, c: &PolicyConfig) -> Policy {
        Policy {
            index,
            name: c.name.clone(),
            timeout: (c.timeout_ms > 0).then(|| ms(c.timeout_ms)),
            retry: c.retry.as_ref().map(|r| Retry {
                max_retries: r.max_retries,
                backoff: r.backoff,
                interval: ms(r.interval_ms),
                max_interval: ms(r.max_interval_ms),
                jitter: r.jitter,
                on: statuses(&r.on),
                attempt_timeout: (r.attempt_timeout_ms > 0).then(|| ms(r.attempt_timeout_ms)),
                after_delivery: statuses(&r.on).meets(StatusSet::of(AFTER_DELIVERY)),
            }),
            breaker: c.circuit_breaker.as_ref().map(|b| BreakerSettings {
                consecutive_failures: b.consecutive_failures,
                failure_ratio: b.failure_ratio,
                window: b.window.max(1),
                open: ms(b.open_ms),
                half_open_requests: b.half_open_requests,
                failures: statuses(&b.failures),
            }),
            outlier: c.outlier.as_ref().map(|o| OutlierSettings {
                consecutive_failures: o.consecutive_failures,
                ejection: ms(o.ejection_ms),
                max_ejection: ms(o.max_ejection_ms),
                max_ejected_share: o.max_ejected_share,
                failures: statuses(&o.failures),
            }),
            config: c.clone(),
        }
    }

    /// Whether the router follows the outcomes of requests under it.
    pub fn tracks_outcomes(&self) -> bool {
        self.retry.is_some() || self.breaker.is_some() || self.outlier.is_some()
    }
}

impl Retry {
    /// Whether a request that ended in `status` is tried again.
    #[inline]
    pub fn retries(&self, status: Status) -> bool {
        self.on.contains(status)
    }

    /// Whether a retry may need the request after it left the core: a
    /// status that can come back after delivery is retried.
    #[inline]
    pub fn needs_copy(&self) -> bool {
        self.after_delivery
    }

    /// The wait before retry number `retry` (1 for the first), drawn with
    /// `draw` in [0, 1): the interval (doubled per retry for exponential
    /// backoff, at most `max_interval`) times 1 ± `jitter`.
    pub fn delay(&self, retry: u32, draw: f64) -> Duration {
        let base = match self.backoff {
            Backoff::Constant => self.interval,
            Backoff::Exponential => {
                let doubled = self.interval.saturating_mul(1u32 << retry.saturating_sub(1).min(20));
                doubled.min(self.max_interval)
            }
        };
        let factor = 1.0 + self.jitter * (2.0 * draw - 1.0);
        base.mul_f64(factor.max(0.0))
    }
}
