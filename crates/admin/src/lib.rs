//! The admin API: HTTP/JSON on `[admin] address:port` (loopback by
//! default), to operate a running core — add, change, restart and remove
//! services, list subscriptions, change the log level, read metrics.
//! Served on the core's event loop like everything else: handlers read and
//! change the state directly, and never hold a borrow across an await.
//! docs/ADMIN.md describes it; docs/admin-openapi.json specifies it.

mod auth;
mod connections;
mod cron;
mod dashboard;
mod http_clients;
mod log_level;
mod node;
mod prometheus;
mod queues;
pub mod recent_logs;
mod reload;
mod reply;
mod reports;
mod resiliency;
pub mod routes;
mod services;
mod views;
mod websockets;

pub use auth::Guard;
pub use log_level::{check_filter, LogControl};
pub use reload::{ReloadError, Reloader};

use connections::{Admission, Slots};
use cumulo_config::{AdminConfig, Role};
use cumulo_node::supervisor::Supervisor;
use cumulo_router::Shared;
use cumulo_sys::Throttle;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{header, Request, Response, StatusCode};
use reply::{ApiError, Body};
use routes::{Miss, Route};
use std::net::IpAddr;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};
use tokio::net::TcpListener;

/// Largest request body: a list of services is a few KiB.
const MAX_BODY: usize = 1024 * 1024;
/// Admin connections open at once. Past it a new connection takes the place
/// of the oldest one not in a call (connections.rs); operators, the CLI and
/// a Prometheus scraper need a handful.
const MAX_CONNECTIONS: usize = 64;
/// Time a client has to send its request head (and an idle keep-alive
/// connection may wait for its next one): every client of this API sends its
/// request at once.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to send its request body once the head is in: at most
/// 1 MiB, sent at once by every client of this API.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The OpenAPI document, served at `/v1/openapi.json`.
pub const OPENAPI: &str = include_str!("../../../docs/admin-openapi.json");

/// What the handlers work with.
pub struct AdminContext {
    pub core: Shared,
    pub supervisor: Rc<Supervisor>,
    /// The config file's services, applied again by `POST /v1/reload`.
    pub reloader: Rc<crate::reload::Reloader>,
    pub log: Rc<LogControl>,
    /// The tokens and the brake on guessing them.
    pub auth: auth::Guard,
    /// The other shards (`core.threads` > 1), whose counters the views add.
    pub shards: Option<Rc<cumulo_node::shards::Links>>,
    /// The other nodes of the cloud, when `[cluster]` is configured.
    pub cluster: Option<Rc<std::cell::RefCell<cumulo_cluster::Membership>>>,
    pub started: Instant,
    pub started_at: SystemTime,
}

/// Binds the admin listener (before any service starts); `None` when there
/// is no admin API. A port the config sets (`port_set`) that cannot be
/// bound stops the start, naming the address and the key, as any listener
/// would. The default port already in use (another core on this machine
/// with a default config, say) only turns the admin API off, with a warning
/// saying what that costs: nobody asked for that port, and two such cores
/// should both run.
pub fn bind(cfg: &AdminConfig) -> anyhow::Result<Option<TcpListener>> {
    if !cfg.enabled() {
        return Ok(None);
    }
    let addr = cfg.socket_addr();
    let std = match std::net::TcpListener::bind(addr) {
        Ok(l) => l,
        Err(e) if !cfg.port_set && e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(
                "admin API off: cannot listen for the admin API on {addr}, the default port (admin.port is not set): \
                 {e} (another core running?). This core runs without it: it cannot be drained, scaled or watched \
                 through the admin API, /metrics or the cumulo client commands. Set admin.port to a free port, or \
                 to 0 for no admin API"
            );
            return Ok(None);
        }
        Err(e) => anyhow::bail!(
            "cannot listen for the admin API on {addr} (admin.port = {} in the config): {e}; another core running? \
             give admin.port a free port, or 0 for no admin API",
            cfg.port
        ),
    };
    std.set_nonblocking(true)?;
    let l = TcpListener::from_std(std)?;
    let auth = match cfg.tokens.len() {
        0 => "no token".to_string(),
        n => format!("bearer token required, {n} configured"),
    };
    tracing::info!("admin API listening on http://{} ({auth})", l.local_addr()?);
    Ok(Some(l))
}

pub async fn serve(listener: TcpListener, ctx: Rc<AdminContext>) {
    let slots = Slots::new(MAX_CONNECTIONS);
    // A flood of connections must not become a flood of log lines.
    let (mut made_room, mut refused, mut accept_failed) =
        (Throttle::default(), Throttle::default(), Throttle::default());
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok((s, peer)) => (s, peer.ip()),
            Err(e) => {
                accept_failed.warn(|n| format!("admin API: accept failed {n} times, last: {e}; retrying in 100 ms"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = match slots.admit(Some(std::os::fd::AsRawFd::as_raw_fd(&stream))) {
            Admission::Free(slot) => slot,
            Admission::MadeRoom(slot) => {
                made_room.warn(|n| {
                    format!("admin API: {MAX_CONNECTIONS} connections open; closed {n} idle ones (no request, or between requests) to make room for new ones")
                });
                slot
            }
            Admission::Full => {
                let _ = stream.try_write(too_many_connections().as_bytes());
                refused.warn(|n| format!("admin API: refused {n} connections: {MAX_CONNECTIONS} open, each in a call"));
                continue;
            }
        };
        let (ctx, slots) = (ctx.clone(), slots.clone());
        tokio::task::spawn_local(async move {
            let in_calls = slot.clone();
            let service = hyper::service::service_fn(move |req| {
                let (ctx, in_call) = (ctx.clone(), in_calls.call());
                async move {
                    let r = handle(&ctx, peer, req).await;
                    drop(in_call);
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                ended = conn => if let Err(e) = ended {
                    tracing::debug!("admin API connection: {e}");
                },
                _ = slot.closed.cancelled() => tracing::debug!("admin API connection closed to make room"),
            }
            slots.release(&slot);
        });
        // Let the new connection read its request before the next accept:
        // a client that sent its request at once is then in a call, and
        // cannot be the one closed to make room for those queued behind it.
        tokio::task::yield_now().await;
    }
}

/// The answer to a connection over the limit when every open one is in a
/// call.
fn too_many_connections() -> String {
    let body = format!(
        "{{\"code\": \"too_many_connections\", \"message\": \"{MAX_CONNECTIONS} admin connections are open, each in a call; try again\"}}\n"
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn handle(ctx: &Rc<AdminContext>, peer: IpAddr, req: Request<Incoming>) -> Response<Body> {
    let (method, path) = (req.method().as_str().to_string(), req.uri().path().to_string());
    let r = match answer(ctx, peer, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    tracing::debug!("admin API: {method} {path} -> {}", r.status().as_u16());
    r
}

async fn answer(ctx: &Rc<AdminContext>, peer: IpAddr, req: Request<Incoming>) -> Result<Response<Body>, ApiError> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let found = routes::find(req.method().as_str(), &path);
    // Checked before the route is looked at further and before the body is
    // read: a caller without a token learns nothing and holds nothing.
    let caller = match found {
        Ok((route, _)) if route.is_public() => None,
        _ => Some(ctx.auth.check(peer, req.headers().get(header::AUTHORIZATION))?),
    };
    let (route, id) = match found {
        Ok(found) => found,
        Err(Miss::NotFound) => {
            return Err(ApiError::not_found(format!("no such call: {path} (see GET /v1/openapi.json)")))
        }
        Err(Miss::MethodNotAllowed(allowed)) => {
            let mut r = ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                format!("{} is not allowed on {path} (allowed: {})", req.method(), allowed.join(", ")),
            )
            .into_response();
            r.headers_mut().insert(header::ALLOW, header::HeaderValue::from_str(&allowed.join(", ")).unwrap());
            return Ok(r);
        }
    };
    if let Some(c) = caller.as_ref().filter(|c| route.needs() == Role::Operate && c.role != Role::Operate) {
        return Err(auth::forbidden(c, req.method().as_str(), &path));
    }
    let id = id.map(str::to_string);
    let body = read_body(req).await?;
    let (status, value) = match route {
        Route::Metrics => {
            let text = prometheus::render(ctx).await;
            return Ok(reply::with_type(StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", text.into_bytes()));
        }
        Route::OpenApi => return Ok(reply::with_type(StatusCode::OK, "application/json", OPENAPI.as_bytes().to_vec())),
        Route::ListServices => services::list(ctx).await,
        Route::AddServices => services::add(ctx, &body),
        Route::GetService => services::get(ctx, id.as_deref()).await,
        Route::UpdateService => services::update(ctx, id.as_deref(), &body).await,
        Route::RemoveService => services::remove(ctx, id.as_deref()).await,
        Route::RestartService => services::restart(ctx, id.as_deref()).await,
        Route::Subscriptions => node::subscriptions(ctx),
        Route::Nodes => node::nodes(ctx),
        Route::GetLogLevel => node::get_log_level(ctx),
        Route::SetLogLevel => node::set_log_level(ctx, &body),
        Route::Status => node::status(ctx).await,
        Route::WebSockets => websockets::list(ctx),
        Route::CloseWebSocket => websockets::close(ctx, id.as_deref()),
        Route::Stats => dashboard::stats(ctx).await,
        Route::Logs => dashboard::logs(query.as_deref()),
        Route::Reports => reports::list(ctx, query.as_deref()),
        Route::Queues => queues::list(ctx),
        Route::QueueDeadLetters => queues::operate(ctx, "dead_letters", query.as_deref()),
        Route::QueueReplay => queues::operate(ctx, "replay", query.as_deref()),
        Route::QueuePurge => queues::operate(ctx, "purge", query.as_deref()),
        Route::HttpClients => http_clients::list(ctx),
        Route::Cron => cron::list(ctx),
        Route::Dashboard => return Ok(dashboard::page()),
        Route::DashboardScript => return Ok(dashboard::script()),
        Route::DashboardStyle => return Ok(dashboard::style()),
        Route::WhoAmI => auth::whoami(caller.as_ref()),
        Route::Reload => services::reload(ctx, query.as_deref()).await,
        Route::Resiliency => resiliency::get(ctx).await,
        Route::SetPolicies => resiliency::set(ctx, &body).await,
        Route::ResetBreakers => resiliency::reset(ctx, query.as_deref()).await,
    }?;
    Ok(reply::json(status, &value))
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    let read = tokio::time::timeout(BODY_TIMEOUT, Limited::new(req.into_body(), MAX_BODY).collect());
    let Ok(read) = read.await else {
        return Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!("the request body did not arrive within {} s", BODY_TIMEOUT.as_secs()),
        ));
    };
    match read {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body over {MAX_BODY} bytes"),
        )),
        Err(e) => Err(ApiError::bad_request("bad_request", format!("cannot read the request body: {e}"))),
    }
}

/// Parses `{id}`: ids are positive integers.
fn service_id(id: Option<&str>) -> Result<cumulo_router::ServiceId, ApiError> {
    let id = id.unwrap_or_default();
    id.parse()
        .map_err(|_| ApiError::not_found(format!("no service with id '{id}' (ids are numbers, see GET /v1/services)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_is_json_of_its_content_length() {
        let text = too_many_connections();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 ") && head.contains(&format!("content-length: {}\r\n", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["code"], "too_many_connections");
    }

    #[test]
    fn the_openapi_document_is_json() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("docs/admin-openapi.json parses");
        assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    }
}
