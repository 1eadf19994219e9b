//! `request_rate`: the load generator as a service. Its instances send
//! requests to `settings.service_name` at a fixed rate, or search for the
//! highest rate the service holds (`request_rate = "dynamic"`, the default),
//! and log what they measured: "stable at N [min .. max] requests/second"
//! and the latency report, in the layout of CloudI's request_rate.
//! Settings: see `settings.rs` and docs/LOADGEN.md.

mod group;
mod lane;
mod settings;

use crate::answer::judge;
use crate::driver::{drive, Held, Observer, Plan, RateMode, TickRecord};
use crate::progress::human_us;
use crate::recorder::Outcome;
use crate::schedule::Pacer;
use cumulo_service::{SendOptions, ServiceApi};
use settings::Settings;
use std::time::Duration;

pub struct RequestRate {
    s: Settings,
}

/// Checks `request_rate`'s settings without creating it (what a config file
/// and the admin API are checked against).
pub fn check_settings(settings: &toml::Table) -> Result<(), String> {
    Settings::parse(settings).map(drop)
}

impl RequestRate {
    pub fn from_settings(settings: &toml::Table) -> Result<RequestRate, String> {
        Ok(RequestRate { s: Settings::parse(settings)? })
    }

    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi>(self, api: A) {
        let s = &self.s;
        let key = format!("{} {}", api.prefix(), s.spec.name);
        let (group, lane) = group::join(&key, api.process_count() * api.thread_count());
        let pacer = Pacer::new(lane as usize, group.size as usize, group.pace.subscribe());
        let send = lane::run(&api, &s.spec, pacer, &group.rec, s.inflight_max);
        if lane != 0 {
            return send.await;
        }
        let lead = async {
            wait_for_service(&api, s).await;
            let plan = Plan {
                mode: s.rate.map_or_else(|| RateMode::Dynamic(s.dynamic.clone()), RateMode::Fixed),
                tick: s.tick,
                timeout: s.timeout,
                duration: None,
                stop_when_stable: false,
                report_every: Some(s.dynamic.stable_ticks),
            };
            let mut log = Log { name: &s.spec.name, settings: s, was_stable: false };
            drive(&plan, &group.pace, &group.rec, &mut log).await;
        };
        tokio::join!(send, lead);
    }
}

/// Waits until the service answers one request well, so that a service
/// still starting is not mistaken for one that fails.
async fn wait_for_service<A: ServiceApi>(api: &A, s: &Settings) {
    let options = SendOptions { timeout_ms: s.spec.timeout_ms, wait_for_service: true, ..Default::default() };
    let mut tries = 0u32;
    loop {
        let r = api.call(&s.spec.name, &s.spec.request_info, &s.spec.request, options).await;
        match judge(r.status, &r.response, s.spec.check.as_deref()) {
            Outcome::Ok => return,
            failed if tries == 0 => {
                let why = match failed {
                    Outcome::Error { why, .. } => why,
                    _ => "no answer in time".to_string(),
                };
                tracing::error!(service = %s.spec.name, "request_rate: a first request failed ({why}); retrying every second before starting");
            }
            _ => {}
        }
        tries += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Logs what the tick loop finds: the reports and fixed-rate ticks at info,
/// the search's steps at debug.
struct Log<'a> {
    name: &'a str,
    settings: &'a Settings,
    was_stable: bool,
}

impl Observer for Log<'_> {
    fn tick(&mut self, t: &TickRecord) {
        let target = t.target_rate.map(|r| format!(" (target {r:.1})")).unwrap_or_default();
        match &t.failed {
            Some(why) if self.was_stable => {
                self.was_stable = false;
                tracing::warn!(service = %self.name, "request_rate: the stable rate no longer holds ({why}); searching again");
            }
            _ => {
                let line = format!(
                    "request_rate: tick {}: {:.1} requests/second{target}, p50 {}, p99 {}, {} errors, {} timeouts{}",
                    t.index,
                    t.rate,
                    human_us(t.p50_us),
                    human_us(t.p99_us),
                    t.errors,
                    t.timeouts,
                    t.failed.as_deref().map(|w| format!(": failed: {w}")).unwrap_or_default()
                );
                // A fixed rate reports every tick; a search's steps are detail.
                if self.settings.rate.is_some() {
                    tracing::info!(service = %self.name, "{line}");
                } else {
                    tracing::debug!(service = %self.name, "{line}");
                }
            }
        }
    }

    fn held(&mut self, h: &Held) {
        self.was_stable = self.settings.rate.is_none();
        // The file first: whoever reads the log line finds the file current.
        if let Some(path) = &self.settings.report_file {
            let json = serde_json::json!({ "service_name": self.name, "report": h });
            if let Err(e) = std::fs::write(path, format!("{json:#}\n")) {
                tracing::warn!(service = %self.name, "request_rate: cannot write {}: {e}", path.display());
            }
        }
        let search = h.search.as_ref().map(|c| format!("\n  {}", c.line())).unwrap_or_default();
        tracing::info!(service = %self.name, "{}\n{}{search}", h.line, h.latency.to_text().trim_end());
    }

    fn note(&mut self, msg: &str) {
        tracing::debug!(service = %self.name, "request_rate: {msg}");
    }
}
