//! `cron`: sends requests on a schedule, as CloudI's `cloudi_service_cron`
//! does. Each job has a cron expression in CloudI's syntax (`expr`), a
//! destination and a request; at each of its events the service sends (or
//! multicasts) the request, with request_info saying which job and event it
//! is, and a timeout that runs to the job's next event. Times are civil
//! times in UTC, the system's zone or a named one (`zone`: what DST does to
//! events). Through a queue (`via`) each event is sent once per cloud
//! however many nodes run the service. Settings: docs/CONFIG.md; the
//! service: docs/CRON.md.
//!
//! It reaches the core through the service API only (`cumulo-service`).

mod error;
// The parser and the next-event computation are public only to the fuzz
// target and the tests.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod expr;
#[cfg(not(feature = "fuzzing"))]
mod expr;
mod report;
mod service;
mod settings;
#[cfg(test)]
mod tests;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod zone;
#[cfg(not(feature = "fuzzing"))]
mod zone;

pub use error::CronError;
pub use settings::{MAX_JOBS, MAX_NAME_LEN, MAX_REQUEST_BYTES};
/// The time and random libraries, for the fuzz target's inputs.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use {fastrand, jiff};

use cumulo_service::ServiceApi;
use settings::Settings;

/// Checks `cron`'s settings without creating it (what a config file and
/// the admin API are checked against).
pub fn check_settings(table: &toml::Table) -> Result<(), String> {
    Settings::from_settings(table).map(drop).map_err(|e| format!("cron: {e}"))
}

pub struct Cron {
    settings: Settings,
}

impl Cron {
    pub fn from_settings(table: &toml::Table) -> Result<Cron, String> {
        Ok(Cron { settings: Settings::from_settings(table).map_err(|e| format!("cron: {e}"))? })
    }

    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        service::run(self.settings, api).await
    }
}
