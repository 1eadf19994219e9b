//! `health_check`: watches hosts, as CloudI's `cloudi_service_health_check`
//! does. Every `interval_ms` each host is checked (its name resolved, a TCP
//! connection opened, and for a URL a `GET` whose status must be the one
//! expected, through the http_client library on a new connection each
//! time); their state is served at `<prefix>hosts.json/get`, and the
//! `notify` names get a request when a host goes down and when it comes
//! back, with how long it was down (docs/HEALTH_CHECK.md).
//!
//! It reaches the core through the service API only (`cumulo-service`).

mod probe;
mod settings;
mod state;
#[cfg(test)]
mod tests;

use cumulo_http_client::Client;
use cumulo_service::{info, Metric, MetricKind, Report, SendOptions, ServiceApi, ServiceError, Status};
use serde_json::json;
use settings::{Settings, Target};
use state::{Change, Health, HostState};
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Instant;

/// The name served under the prefix.
const HOSTS_JSON: &str = "hosts.json/get";
/// Largest body of a URL check's answer, bytes: read and dropped; a larger
/// one fails the check (`too_large`).
const MAX_CHECK_BODY: usize = 1 << 20;
/// A notification's timeout, ms, which is also how long it waits for its
/// receiver to subscribe: long enough for a service that starts after this
/// one, or answers slowly.
const NOTIFY_TIMEOUT_MS: u32 = 10_000;

/// Checks `health_check`'s settings without creating it.
pub fn check_settings(table: &toml::Table) -> Result<(), String> {
    Settings::from_settings(table).map(drop)
}

pub struct HealthCheck {
    settings: Settings,
}

impl HealthCheck {
    pub fn from_settings(table: &toml::Table) -> Result<HealthCheck, String> {
        Ok(HealthCheck { settings: Settings::from_settings(table)? })
    }

    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let client = match self.settings.client_settings().and_then(|s| Client::new(&s, MAX_CHECK_BODY)) {
            Ok(c) => c,
            Err(e) => return tracing::error!("health_check {}: {e}", api.prefix()),
        };
        if let Err(e) = api.subscribe(HOSTS_JSON) {
            return tracing::error!("health_check: cannot subscribe '{}{HOSTS_JSON}': {}", api.prefix(), e.why());
        }
        let now = Instant::now();
        let hosts = self.settings.hosts.iter().map(|_| HostState::new(now)).collect();
        let watch = Rc::new(Watch { api, client, settings: self.settings, hosts: RefCell::new(hosts) });
        watch.api.report(Rc::new(WatchReport { watch: Rc::downgrade(&watch), prefix: watch.api.prefix().to_string() }));
        tracing::info!(
            "health_check: watching {} hosts every {} ms, state at {}{HOSTS_JSON}",
            watch.settings.hosts.len(),
            watch.settings.interval.as_millis(),
            watch.api.prefix()
        );
        let tasks: Vec<_> = (0..watch.settings.hosts.len())
            .map(|i| {
                let watch = watch.clone();
                tokio::task::spawn_local(async move { watch.watch(i).await })
            })
            .collect();
        while let Some(req) = watch.api.next_request().await {
            let body = serde_json::to_vec(&watch.view()).unwrap_or_default();
            let info = info::encode(&[("content-type", "application/json")]);
            watch.api.return_(&req, Status::Ok, &info, &body);
        }
        for t in tasks {
            t.abort();
        }
    }
}

struct Watch<A> {
    api: A,
    client: Client,
    settings: Settings,
    hosts: RefCell<Vec<HostState>>,
}

fn target_text(t: &Target) -> String {
    match t {
        Target::Http { url, .. } => url.clone(),
        Target::Tcp { host, port } => format!("{host}:{port}"),
    }
}

impl<A: ServiceApi> Watch<A> {
    /// Checks host `i` every interval, forever.
    async fn watch(&self, i: usize) {
        let host = &self.settings.hosts[i];
        let mut every = tokio::time::interval(self.settings.interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let result = probe::check(&host.target, &self.client, self.settings.timeout).await;
            let change = self.hosts.borrow_mut()[i].record(result, Instant::now(), self.settings.down_after);
            if let Some(change) = change {
                self.tell(&host.name, &target_text(&host.target), change);
            }
        }
    }

    /// Logs a change and sends it to the `notify` names (answers are only
    /// logged when they are errors).
    fn tell(&self, name: &str, target: &str, change: Change) {
        let (state, body) = match &change {
            Change::Down(f) => {
                tracing::warn!("health_check: host '{name}' is down: {}: {}", f.kind, f.why);
                ("down", json!({ "host": name, "target": target, "state": "down", "error": f.kind, "why": f.why }))
            }
            Change::Up { down_for } => {
                tracing::info!("health_check: host '{name}' is up again after {} ms down", down_for.as_millis());
                let down_ms = down_for.as_millis() as u64;
                ("up", json!({ "host": name, "target": target, "state": "up", "down_ms": down_ms }))
            }
        };
        let info = info::encode(&[
            ("health_check_host", name),
            ("health_check_state", state),
            ("content-type", "application/json"),
        ]);
        let body = body.to_string().into_bytes();
        // A receiver may start after this service: the change waits for it.
        let o = SendOptions { timeout_ms: NOTIFY_TIMEOUT_MS, wait_for_service: true, ..Default::default() };
        for to in &self.settings.notify {
            let answer = self.api.call(to, &info, &body, o);
            let to = to.clone();
            tokio::task::spawn_local(async move {
                let r = answer.await;
                if r.status != Status::Ok {
                    tracing::warn!(
                        "health_check: notifying {to}: {:?}: {}",
                        r.status,
                        String::from_utf8_lossy(&r.response)
                    );
                }
            });
        }
    }

    fn view(&self) -> serde_json::Value {
        let now = Instant::now();
        let hosts = self.hosts.borrow();
        let list: Vec<_> = self
            .settings
            .hosts
            .iter()
            .zip(hosts.iter())
            .map(|(h, s)| s.view(&h.name, &target_text(&h.target), now))
            .collect();
        json!({ "interval_ms": self.settings.interval.as_millis() as u64, "hosts": list })
    }
}

struct WatchReport<A> {
    watch: Weak<Watch<A>>,
    prefix: String,
}

impl<A: ServiceApi + 'static> Report for WatchReport<A> {
    fn kind(&self) -> &'static str {
        "health_check"
    }

    fn id(&self) -> String {
        self.prefix.clone()
    }

    fn view(&self) -> serde_json::Value {
        match self.watch.upgrade() {
            Some(w) => w.view(),
            None => json!({ "prefix": self.prefix, "running": false }),
        }
    }

    fn metrics(&self, out: &mut Vec<Metric>) {
        let Some(w) = self.watch.upgrade() else { return };
        let hosts = w.hosts.borrow();
        for (h, s) in w.settings.hosts.iter().zip(hosts.iter()) {
            let labels = || vec![("service", self.prefix.clone()), ("host", h.name.clone())];
            if s.health != Health::Unknown {
                out.push(Metric {
                    name: "health_check_up",
                    help: "Whether a host watched by health_check passes its checks (1) or is down (0).",
                    kind: MetricKind::Gauge,
                    labels: labels(),
                    value: f64::from(u8::from(s.health == Health::Up)),
                });
            }
            out.push(Metric {
                name: "health_check_checks_total",
                help: "Checks of a host by health_check.",
                kind: MetricKind::Counter,
                labels: labels(),
                value: s.checks as f64,
            });
            out.push(Metric {
                name: "health_check_failures_total",
                help: "Checks of a host by health_check that failed.",
                kind: MetricKind::Counter,
                labels: labels(),
                value: s.failed as f64,
            });
        }
    }

    fn operate(&self, op: &str, _args: &serde_json::Value) -> Result<serde_json::Value, ServiceError> {
        Err(ServiceError::new(Status::InvalidArgument, format!("health_check: no operation '{op}'")))
    }
}
