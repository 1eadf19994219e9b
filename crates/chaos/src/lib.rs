//! `chaos`: a service that misbehaves on purpose, as CloudI's
//! `monkey_latency` and `monkey_chaos` options do, to prove what callers,
//! retries and the supervisor do about it (docs/CONFIG.md, the chaos internal service).
//!
//! Each request draws once: with probability `fail` it is answered
//! `SERVICE_ERROR`; with `drop` it is never answered (its sender gets
//! `TIMEOUT` from the core); with `exit` the instance stops, as a crashed
//! process would (what it holds fails `CRASHED`, the supervisor starts it
//! again after `restart_delay`); with `delay` it is answered after
//! `delay_ms`; otherwise it is answered at once, as `echo` answers (its own
//! request_info and body). The shares add up to at most 1.

mod settings;

pub use settings::Settings;

use cumulo_service::{Request, ServiceApi, Status};
use std::rc::Rc;
use std::time::Duration;

/// What one request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    Answer,
    Delay,
    Fail,
    Drop,
    Exit,
}

pub struct Chaos {
    settings: Settings,
    rng: fastrand::Rng,
}

impl Chaos {
    pub fn from_settings(table: &toml::Table) -> Result<Chaos, String> {
        let settings = Settings::from_settings(table)?;
        let rng = settings.seed.map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed);
        Ok(Chaos { settings, rng })
    }

    /// The fate of the next request: one draw against the shares in a
    /// fixed order.
    pub fn draw(&mut self) -> Fate {
        let s = &self.settings;
        let mut u = self.rng.f64();
        for (share, fate) in [(s.fail, Fate::Fail), (s.drop, Fate::Drop), (s.exit, Fate::Exit), (s.delay, Fate::Delay)]
        {
            if u < share {
                return fate;
            }
            u -= share;
        }
        Fate::Answer
    }

    pub async fn run<A: ServiceApi + 'static>(mut self, api: A) {
        if let Err(e) = api.subscribe(&self.settings.pattern) {
            tracing::error!("chaos: cannot subscribe '{}': {}", self.settings.pattern, e.why());
            return;
        }
        let api = Rc::new(api);
        let delay = Duration::from_millis(self.settings.delay_ms as u64);
        while let Some(req) = api.next_request().await {
            match self.draw() {
                Fate::Answer => api.return_(&req, Status::Ok, req.request_info(), req.body()),
                Fate::Fail => api.return_(&req, Status::ServiceError, b"", b"chaos: this request failed on purpose"),
                // Never answered: the core times it out for its sender.
                Fate::Drop => drop(req),
                Fate::Exit => {
                    tracing::warn!("chaos {}: stopping this instance on purpose", api.prefix());
                    return;
                }
                Fate::Delay => {
                    let api = api.clone();
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep(delay).await;
                        api.return_(&req, Status::Ok, req.request_info(), req.body());
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
