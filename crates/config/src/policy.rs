//! `[[policy]]`: resiliency policies (docs/CONFIG.md, "Resiliency"). Each
//! names the destinations it covers (patterns matched against the names
//! requests are sent to; the most specific wins) and any of a timeout, a
//! retry, a circuit breaker and outlier ejection. With no policy nothing is
//! retried, tripped or ejected: a request fails once, as it always did.

use cumulo_proto::Status;
use serde::{Deserialize, Serialize};

/// Policies in one file (or one admin API call), at most.
pub const MAX_POLICIES: usize = 256;
/// Destinations of one policy, at most.
pub const MAX_POLICY_DESTINATIONS: usize = 64;
/// Retries of one request, at most: each is a copy of the request routed
/// again, so a policy cannot make one request cost the core unbounded work.
pub const MAX_RETRIES: u32 = 16;
/// Outcomes a breaker's failure-ratio window holds, at most.
pub const MAX_BREAKER_WINDOW: u32 = 1024;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// How operators, logs and metrics name it.
    pub name: String,
    /// Patterns of the names it covers ("/payments/*"); "*" alone covers
    /// every name (a default under more specific policies).
    pub destinations: Vec<String>,
    /// A request's timeout to these destinations, ms, at most: the caller's
    /// own timeout when shorter (0: the caller's, always).
    #[serde(default)]
    pub timeout_ms: u32,
    #[serde(default)]
    pub retry: Option<RetryConfig>,
    #[serde(default)]
    pub circuit_breaker: Option<BreakerConfig>,
    #[serde(default)]
    pub outlier: Option<OutlierConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// The same interval before every retry.
    Constant,
    /// The interval doubles with each retry, up to `max_interval_ms`.
    #[default]
    Exponential,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    pub max_retries: u32,
    pub backoff: Backoff,
    /// The wait before the first retry, ms.
    pub interval_ms: u32,
    /// The longest wait between two attempts, ms (exponential backoff).
    pub max_interval_ms: u32,
    /// Each wait is drawn in interval x (1 - jitter ..= 1 + jitter).
    pub jitter: f64,
    /// The statuses retried (names as in PROTOCOL.md). By default only what
    /// certainly did not run: NO_SERVICE and QUEUE_FULL. TIMEOUT, CRASHED
    /// and SERVICE_ERROR only when listed: the work may have been done.
    pub on: Vec<String>,
    /// Each attempt's timeout, ms, within the request's (0: an attempt may
    /// take all the time left). A TIMEOUT is retried only when an attempt
    /// ends before the request's own deadline.
    pub attempt_timeout_ms: u32,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 3,
            backoff: Backoff::Exponential,
            interval_ms: 20,
            max_interval_ms: 1000,
            jitter: 0.2,
            on: vec!["NO_SERVICE".into(), "QUEUE_FULL".into()],
            attempt_timeout_ms: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    /// Trips after this many failures in a row (0: not by count).
    pub consecutive_failures: u32,
    /// Trips when at least this share of the last `window` outcomes failed
    /// (0: not by ratio); judged once `window` outcomes are known.
    pub failure_ratio: f64,
    pub window: u32,
    /// How long it stays open (every request answered UNAVAILABLE at once)
    /// before letting probes through, ms.
    pub open_ms: u32,
    /// Requests let through while half-open; one success closes it, one
    /// failure opens it again.
    pub half_open_requests: u32,
    /// The statuses counted as failures (default TIMEOUT, CRASHED,
    /// SERVICE_ERROR).
    pub failures: Vec<String>,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: 5,
            failure_ratio: 0.0,
            window: 20,
            open_ms: 30_000,
            half_open_requests: 1,
            failures: default_failures(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutlierConfig {
    /// An instance that fails this many requests in a row is taken out of
    /// selection.
    pub consecutive_failures: u32,
    /// Its first time out, ms; doubled each time it is taken out again
    /// without a success between.
    pub ejection_ms: u32,
    pub max_ejection_ms: u32,
    /// The share of a pattern's instances that may be out at once; at least
    /// one instance always stays in.
    pub max_ejected_share: f64,
    /// The statuses counted as failures (default TIMEOUT, CRASHED,
    /// SERVICE_ERROR).
    pub failures: Vec<String>,
}

impl Default for OutlierConfig {
    fn default() -> Self {
        OutlierConfig {
            consecutive_failures: 5,
            ejection_ms: 1000,
            max_ejection_ms: 30_000,
            max_ejected_share: 0.5,
            failures: default_failures(),
        }
    }
}

fn default_failures() -> Vec<String> {
    vec!["TIMEOUT".into(), "CRASHED".into(), "SERVICE_ERROR".into()]
}

/// Statuses a policy may name: those a request can end in.
const RETRYABLE: &[Status] = &[
    Status::Timeout,
    Status::NoService,
    Status::QueueFull,
    Status::Crashed,
    Status::ServiceError,
    Status::Unavailable,
    Status::ShuttingDown,
];

/// The statuses of a list, or which one is not known (or not one a request
/// can be retried for).
pub fn parse_statuses(names: &[String]) -> Result<Vec<Status>, String> {
    names
        .iter()
        .map(|n| {
            Status::from_name(n).filter(|s| RETRYABLE.contains(s)).ok_or_else(|| {
                let known: Vec<_> = RETRYABLE.iter().map(|s| s.name()).collect();
                format!("'{n}' is not a status a request can fail with (one of {})", known.join(", "))
            })
        })
        .collect()
}

/// Checks a list of policies: (field, reason) for the first wrong one,
/// fields named `{at}[i].key` as in the file (`policy[0].retry.jitter`).
pub fn validate(at: &str, policies: &[PolicyConfig]) -> Result<(), (String, String)> {
    if policies.len() > MAX_POLICIES {
        return Err((at.into(), format!("at most {MAX_POLICIES} policies")));
    }
    for (i, p) in policies.iter().enumerate() {
        let field = |f: &str| format!("{at}[{i}].{f}");
        let bad = |f: &str, why: String| Err((field(f), why));
        if p.name.is_empty() || p.name.len() > 128 {
            return bad("name", "must be 1 .. 128 characters".into());
        }
        if policies[..i].iter().any(|q| q.name == p.name) {
            return bad("name", format!("'{}' names two policies", p.name));
        }
        if p.destinations.is_empty() || p.destinations.len() > MAX_POLICY_DESTINATIONS {
            return bad("destinations", format!("give 1 .. {MAX_POLICY_DESTINATIONS} patterns"));
        }
        for d in &p.destinations {
            if let Err(why) = cumulo_pattern::validate(d) {
                return bad("destinations", format!("'{d}': {why}"));
            }
        }
        if p.retry.is_none() && p.circuit_breaker.is_none() && p.outlier.is_none() && p.timeout_ms == 0 {
            return bad("name", "does nothing: give timeout_ms, retry, circuit_breaker or outlier".into());
        }
        if let Some(r) = &p.retry {
            if r.max_retries == 0 || r.max_retries > MAX_RETRIES {
                return bad("retry.max_retries", format!("must be 1 .. {MAX_RETRIES}"));
            }
            if r.interval_ms == 0 {
                return bad("retry.interval_ms", "must be at least 1 ms".into());
            }
            if r.max_interval_ms < r.interval_ms {
                return bad("retry.max_interval_ms", "must be at least retry.interval_ms".into());
            }
            if !(0.0..=1.0).contains(&r.jitter) {
                return bad("retry.jitter", "must be 0 .. 1 (a share of the interval)".into());
            }
            if r.on.is_empty() {
                return bad("retry.on", "name at least one status".into());
            }
            parse_statuses(&r.on).map_err(|why| (field("retry.on"), why))?;
            if p.timeout_ms > 0 && r.attempt_timeout_ms > p.timeout_ms {
                return bad("retry.attempt_timeout_ms", "must not be longer than timeout_ms".into());
            }
        }
        if let Some(b) = &p.circuit_breaker {
            if b.consecutive_failures == 0 && b.failure_ratio == 0.0 {
                return bad("circuit_breaker", "give consecutive_failures or failure_ratio".into());
            }
            if !(0.0..=1.0).contains(&b.failure_ratio) {
                return bad("circuit_breaker.failure_ratio", "must be 0 .. 1".into());
            }
            if b.failure_ratio > 0.0 && !(1..=MAX_BREAKER_WINDOW).contains(&b.window) {
                return bad("circuit_breaker.window", format!("must be 1 .. {MAX_BREAKER_WINDOW} outcomes"));
            }
            if b.open_ms == 0 {
                return bad("circuit_breaker.open_ms", "must be at least 1 ms".into());
            }
            if b.half_open_requests == 0 {
                return bad("circuit_breaker.half_open_requests", "must be at least 1".into());
            }
            if b.failures.is_empty() {
                return bad("circuit_breaker.failures", "name at least one status".into());
            }
            parse_statuses(&b.failures).map_err(|why| (field("circuit_breaker.failures"), why))?;
        }
        if let Some(o) = &p.outlier {
            if o.consecutive_failures == 0 {
                return bad("outlier.consecutive_failures", "must be at least 1".into());
            }
            if o.ejection_ms == 0 {
                return bad("outlier.ejection_ms", "must be at least 1 ms".into());
            }
            if o.max_ejection_ms < o.ejection_ms {
                return bad("outlier.max_ejection_ms", "must be at least outlier.ejection_ms".into());
            }
            if !(0.0..=1.0).contains(&o.max_ejected_share) || o.max_ejected_share == 0.0 {
                return bad("outlier.max_ejected_share", "must be more than 0, at most 1".into());
            }
            if o.failures.is_empty() {
                return bad("outlier.failures", "name at least one status".into());
            }
            parse_statuses(&o.failures).map_err(|why| (field("outlier.failures"), why))?;
        }
    }
    Ok(())
}

/// Policies from JSON (the admin API's body: a list, or `{"policies":
/// [...]}`), checked as a file's are; the error names the field.
pub fn from_json(body: &[u8]) -> Result<Vec<PolicyConfig>, (String, String)> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Wrapped {
        policies: Vec<PolicyConfig>,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Body {
        List(Vec<PolicyConfig>),
        Wrapped(Wrapped),
    }
    let policies = match serde_json::from_slice::<Body>(body) {
        Ok(Body::List(l)) => l,
        Ok(Body::Wrapped(w)) => w.policies,
        // untagged hides the reason: parse as a list again for it.
        Err(_) => {
            serde_json::from_slice::<Vec<PolicyConfig>>(body).map_err(|e| ("policies".to_string(), e.to_string()))?
        }
    };
    validate("policies", &policies)?;
    Ok(policies)
}
