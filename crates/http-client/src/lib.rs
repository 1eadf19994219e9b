//! `http_client`: sends HTTP(S) requests for any service, by name, as
//! CloudI's `cloudi_service_http_client` does. It subscribes
//! `<prefix><method>` (get, head, post, put, patch, delete, options); the
//! URL and headers travel in request_info, the body as the request; the
//! answer's status and headers come back in response_info (`status` plus
//! one key per header), its body as the response. That is the gateway's
//! convention the other way round (docs/HTTP_CLIENT.md).
//!
//! A failure is an answer too, never a hang: `status` 400, 502 or 504 and
//! `http_client_error` naming the cause (`dns`, `connect`, `tls`,
//! `timeout`, `too_large`, `reset`, `protocol`, `redirects`,
//! `bad_request`), the body a sentence. Every request ends by its own
//! deadline (its remaining time, less a margin so that the answer reaches
//! the sender before the core's `TIMEOUT` does).
//!
//! Connections are kept alive per origin and bounded in total (`pool`);
//! HTTPS is rustls, verified against the system's roots and `ca_file`
//! (`connect`). It reaches the core through the service API only
//! (`cumulo-service`); [`Client`] is usable on its own by other services of
//! the core. Settings: docs/CONFIG.md.

mod client;
mod connect;
mod error;
mod outgoing;
mod pool;
mod report;
mod settings;
#[cfg(test)]
mod tests;

pub use client::{Answer, Client};
pub use error::{Error, ErrorKind};
pub use outgoing::{parse_url, Origin, Outgoing, METHODS};
pub use settings::Settings;

use cumulo_service::{info, Request, ServiceApi, Status};
use report::ClientReport;
use std::rc::Rc;
use std::time::Duration;

/// Room kept in the answer's frame for response_info and framing, bytes.
const INFO_ROOM: usize = 64 << 10;
/// How often idle connections are checked for their server closing them
/// or their `idle_timeout`.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// The longest margin kept before a request's deadline, ms: the answer is
/// sent this much before the core would answer `TIMEOUT` (a tenth of the
/// time left when that is shorter).
const DEADLINE_MARGIN_MS: u32 = 100;

/// Checks `http_client`'s settings without creating it (what a config file
/// and the admin API are checked against).
pub fn check_settings(table: &toml::Table) -> Result<(), String> {
    Settings::from_settings(table).map(drop)
}

pub struct HttpClient {
    settings: Settings,
}

impl HttpClient {
    pub fn from_settings(table: &toml::Table) -> Result<HttpClient, String> {
        Ok(HttpClient { settings: Settings::from_settings(table)? })
    }

    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let max_body = (self.settings.max_response_bytes as usize).min(api.max_request().saturating_sub(INFO_ROOM));
        let client = match Client::new(&self.settings, max_body) {
            Ok(c) => Rc::new(c),
            Err(e) => return tracing::error!("http_client {}: {e}", api.prefix()),
        };
        for method in METHODS {
            if let Err(e) = api.subscribe(method) {
                return tracing::error!("http_client: cannot subscribe '{}{method}': {}", api.prefix(), e.why());
            }
        }
        let prefix = api.prefix().to_string();
        api.report(Rc::new(ClientReport {
            client: Rc::downgrade(&client),
            prefix: prefix.clone(),
            process: api.process_index(),
        }));
        let sweeper = Rc::downgrade(&client);
        tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(client) = sweeper.upgrade() else { return };
                client.pool().sweep();
            }
        });
        tracing::info!("http_client: serving {prefix}{{{}}}", METHODS.join(","));
        let service = Rc::new(Service { api, client, settings: self.settings });
        while let Some(req) = service.api.next_request().await {
            let service = service.clone();
            tokio::task::spawn_local(async move { service.answer(req).await });
        }
    }
}

struct Service<A> {
    api: A,
    client: Rc<Client>,
    settings: Settings,
}

impl<A: ServiceApi> Service<A> {
    async fn answer(&self, req: A::Request) {
        let remaining = req.remaining_ms();
        let margin = (remaining / 10).min(DEADLINE_MARGIN_MS);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(u64::from(remaining - margin));
        let method = req.name().strip_prefix(self.api.prefix()).unwrap_or("");
        let result = match Outgoing::from_request(method, req.request_info(), req.body(), self.settings.max_redirects) {
            Ok(out) => self.client.send(out, deadline).await,
            Err(e) => {
                self.client.counters.refused(&e);
                Err(e)
            }
        };
        let (info, body) = match result {
            Ok(answer) => {
                let mut info = Vec::with_capacity(256);
                info::push(&mut info, b"status", answer.status.to_string().as_bytes());
                for (k, v) in &answer.headers {
                    info::push(&mut info, k.as_bytes(), v);
                }
                if info.len() + answer.body.len() > self.api.max_request() {
                    failure(&Error::new(
                        ErrorKind::TooLarge,
                        format!(
                            "the answer's headers and body are over the core's frame ({} bytes)",
                            self.api.max_request()
                        ),
                    ))
                } else {
                    (info, answer.body)
                }
            }
            Err(e) => {
                tracing::debug!("http_client: {} {method}: {e}", req.name());
                failure(&e)
            }
        };
        self.api.return_(&req, Status::Ok, &info, &body);
    }
}

/// A failure's answer: `status`, `http_client_error`, a sentence.
fn failure(e: &Error) -> (Vec<u8>, Vec<u8>) {
    let status = e.kind().http_status().to_string();
    let info = info::encode(&[
        ("status", status.as_str()),
        ("http_client_error", e.kind().name()),
        ("content-type", "text/plain; charset=utf-8"),
    ]);
    (info, format!("http_client: {e}").into_bytes())
}
