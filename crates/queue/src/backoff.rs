//! The delay before the next attempt.

use crate::settings::{Backoff, Settings};
use std::time::Duration;

/// The delay after `failed` failed attempts (1 after the first), with
/// jitter: `retry_delay`, doubled per attempt under `exponential`, at most
/// `retry_max_delay`, then moved by up to ±`jitter` of itself.
pub fn delay(s: &Settings, failed: u32) -> Duration {
    let base = s.retry_delay.as_secs_f64();
    let d = match s.backoff {
        Backoff::Constant => base,
        Backoff::Exponential => base * 2f64.powi(failed.saturating_sub(1).min(60) as i32),
    }
    .min(s.retry_max_delay.as_secs_f64());
    let spread = d * s.jitter;
    let d = d + spread * (fastrand::f64() * 2.0 - 1.0);
    Duration::from_secs_f64(d.max(0.0))
}
