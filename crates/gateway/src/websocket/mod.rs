//! WebSocket (RFC 6455) in the HTTP gateway. On a configured path prefix
//! (`[[service.settings.websocket]]`, off everywhere else) a GET with
//! `Upgrade: websocket` is answered 101 and the connection becomes a
//! WebSocket session (session.rs) over hyper's upgrade, framed by
//! tokio-tungstenite.
//!
//! Each connection is an internal instance of its own, outside any service,
//! that subscribes the connection's name (`name_prefix` + URL path +
//! `name_suffix`, `/chat/room/websocket`) and the names of `subscriptions`:
//! a request any service sends there (send_async, or mcast_async to reach
//! every connection on the path) is pushed to the browser. Being an
//! ordinary instance, it is also seen by the other nodes of a cluster.
//! Messages in become requests to `request_name`; the answers go back.
//! Settings and mapping: docs/GATEWAY.md (WebSocket).

#[cfg(any(test, feature = "fuzzing"))]
mod frames;
mod gate;
mod origin;
mod outgoing;
mod protocol;
mod session;
pub mod settings;
mod table;
mod url;

#[cfg(any(test, feature = "fuzzing"))]
pub use frames::server_frames;
pub use settings::PathSettings;
pub use table::{shared, CloseReason, Table};

use super::names::NameMapping;
use super::request::request_info;
use super::response::{plain, HttpResponse};
use super::settings::HeaderFilter;
use cumulo_proto::info;
use cumulo_service::ServiceApi;
use cumulo_sys::Throttle;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper::{Method, Request, StatusCode};
use session::Session;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};
use tokio_util::sync::CancellationToken;

/// The WebSocket side of one gateway: its paths, and the names held by
/// `unique` connections.
pub struct WebSockets<A> {
    paths: Vec<Rc<PathSettings>>,
    names: NameMapping,
    headers: HeaderFilter,
    /// Cancelled when the gateway stops: every session closes with 1001.
    pub stopping: CancellationToken,
    unique: Rc<UniqueNames<A>>,
    /// Upgrades refused for their Origin, logged at most every few seconds.
    foreign_origins: RefCell<Throttle>,
}

/// A connection holding a `unique` name, and its instance (to unsubscribe
/// the name at once when a newer connection takes it).
type Holder<A> = (Rc<table::Entry>, Weak<A>);

/// For `unique` paths: which connection holds each name.
pub struct UniqueNames<A> {
    holders: RefCell<HashMap<String, Holder<A>>>,
}

impl<A> Default for UniqueNames<A> {
    fn default() -> Self {
        UniqueNames { holders: RefCell::default() }
    }
}

impl<A: ServiceApi> UniqueNames<A> {
    /// Takes `name` for a new connection: the older holder stops being
    /// routed to at once, and is asked to close.
    fn take(&self, name: &str, entry: Rc<table::Entry>, api: Weak<A>) {
        if let Some((old, old_api)) = self.holders.borrow_mut().insert(name.to_string(), (entry, api)) {
            if let Some(api) = old_api.upgrade() {
                let _ = api.unsubscribe(name);
            }
            old.close(CloseReason::Replaced);
        }
    }

    /// A connection ends: it gives its name back unless a newer one took it.
    fn release(&self, name: &str, id: u64) {
        let mut h = self.holders.borrow_mut();
        if h.get(name).is_some_and(|(e, _)| e.id == id) {
            h.remove(name);
        }
    }
}

impl<A: ServiceApi + 'static> WebSockets<A> {
    /// None when no path is configured: no upgrade anywhere.
    pub fn new(paths: Vec<PathSettings>, names: NameMapping, headers: HeaderFilter) -> Option<WebSockets<A>> {
        (!paths.is_empty()).then(|| WebSockets {
            paths: paths.into_iter().map(Rc::new).collect(),
            names,
            headers,
            stopping: CancellationToken::new(),
            unique: Rc::default(),
            foreign_origins: RefCell::default(),
        })
    }

    /// The configured path a WebSocket upgrade request is for; None for any
    /// other request (served as plain HTTP, as on an unconfigured path).
    pub fn accepts(&self, req: &Request<Incoming>) -> Option<Rc<PathSettings>> {
        if req.method() != Method::GET || !has_token(req.headers(), UPGRADE, "websocket") {
            return None;
        }
        let path = req.uri().path();
        self.paths.iter().find(|p| path.starts_with(p.path.as_str())).cloned()
    }

    /// Answers an upgrade request on `cfg`'s path: 101 and a session, or a
    /// refusal that says why.
    pub fn upgrade(
        &self,
        gateway: &A,
        cfg: Rc<PathSettings>,
        mut req: Request<Incoming>,
        remote: &Rc<str>,
    ) -> HttpResponse {
        let table = table::shared();
        let refuse = |status: StatusCode, text: String| {
            table::add(&table.counters.refused, 1);
            plain(status, text)
        };
        if let Some(origin) = cfg.origins.refuses(req.headers()) {
            table::add(&table.counters.origin_refused, 1);
            self.foreign_origins.borrow_mut().warn(|n| {
                format!("http: {n} WebSocket upgrades refused for their Origin, last {origin:?} on {}", cfg.path)
            });
            return refuse(
                StatusCode::FORBIDDEN,
                format!(
                    "forbidden: a WebSocket on {} does not accept pages from Origin {origin:?} (settings.websocket origins)\n",
                    cfg.path
                ),
            );
        }
        let accept_key = match handshake_key(&req) {
            Ok(k) => k,
            Err((status, why)) => {
                let mut r = refuse(status, format!("websocket upgrade refused: {why}\n"));
                if status == StatusCode::UPGRADE_REQUIRED {
                    r.headers_mut().insert("sec-websocket-version", HeaderValue::from_static("13"));
                }
                return r;
            }
        };
        if table.count_on(&cfg.path) >= cfg.max_connections {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "service unavailable: {} WebSocket connections open on {} (max_connections)\n",
                    cfg.max_connections, cfg.path
                ),
            );
        }
        let (url_path, query) = (req.uri().path().to_string(), req.uri().query().unwrap_or("").to_string());
        let name = format!("{}{url_path}{}", self.names.name_prefix, cfg.name_suffix);
        if url_path.contains('*') {
            return refuse(
                StatusCode::BAD_REQUEST,
                "bad request: a WebSocket URL path may not hold '*' (it makes a name)\n".into(),
            );
        }
        if name.len() > gateway.max_name() {
            return refuse(
                StatusCode::URI_TOO_LONG,
                format!("uri too long: the connection's name would be {} bytes, over core.max_name\n", name.len()),
            );
        }
        let extra = match url::expand(&cfg.subscriptions, &url_path, &query) {
            Ok(names) => names,
            Err(why) => return refuse(StatusCode::BAD_REQUEST, format!("bad request: {why}\n")),
        };
        let api = match gateway.open_sibling("") {
            Ok(api) => Rc::new(api),
            Err(e) => return refuse(StatusCode::SERVICE_UNAVAILABLE, format!("service unavailable: {}\n", e.why())),
        };
        for n in std::iter::once(&name).chain(&extra) {
            if let Err(e) = api.subscribe(n) {
                return refuse(StatusCode::BAD_REQUEST, format!("bad request: cannot subscribe '{n}': {}\n", e.why()));
            }
        }
        let entry = table.open(Rc::from(cfg.path.as_str()), url_path.clone(), name.clone(), remote.clone());
        if cfg.unique {
            self.unique.take(&name, entry.clone(), Rc::downgrade(&api));
        }
        let (parts, body) = req.into_parts();
        let mut base_info = request_info(&parts, remote, &self.headers);
        info::push(&mut base_info, b"websocket_id", entry.id.to_string().as_bytes());
        info::push(&mut base_info, b"websocket_name", name.as_bytes());
        let request_name = cfg.request_name.clone().unwrap_or_else(|| self.names.service_name(&Method::GET, &url_path));
        req = Request::from_parts(parts, body);
        let on_upgrade = hyper::upgrade::on(&mut req);
        let with_frame = |kind: &[u8]| {
            let mut i = base_info.clone();
            info::push(&mut i, b"websocket_frame", kind);
            i.into_boxed_slice()
        };
        let (text_info, binary_info) = (with_frame(b"text"), with_frame(b"binary"));
        let session = Session {
            api,
            cfg,
            entry,
            table,
            text_info,
            binary_info,
            base_info: base_info.into(),
            request_name,
            name,
            stopping: self.stopping.clone(),
            unique: self.unique.clone(),
        };
        tokio::task::spawn_local(async move {
            match on_upgrade.await {
                Ok(upgraded) => session.run(hyper_util::rt::TokioIo::new(upgraded)).await,
                Err(e) => {
                    tracing::debug!("http: websocket upgrade did not complete: {e}");
                    session.end_without_socket();
                }
            }
        });
        let mut resp =
            hyper::Response::new(http_body_util::Either::Left(http_body_util::Full::new(bytes::Bytes::new())));
        *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let h = resp.headers_mut();
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(SEC_WEBSOCKET_ACCEPT, accept_key);
        resp
    }
}

/// RFC 6455 4.2.1: the parts of the upgrade request a server must check;
/// the `Sec-WebSocket-Accept` value, or the status and why.
fn handshake_key(req: &Request<Incoming>) -> Result<HeaderValue, (StatusCode, &'static str)> {
    if req.version() != hyper::Version::HTTP_11 {
        return Err((StatusCode::BAD_REQUEST, "a WebSocket upgrade needs HTTP/1.1"));
    }
    if !has_token(req.headers(), CONNECTION, "upgrade") {
        return Err((StatusCode::BAD_REQUEST, "the Connection header must hold 'Upgrade'"));
    }
    if req.headers().get("sec-websocket-version").map(HeaderValue::as_bytes) != Some(b"13") {
        return Err((StatusCode::UPGRADE_REQUIRED, "only Sec-WebSocket-Version 13 is supported"));
    }
    let key = req.headers().get(SEC_WEBSOCKET_KEY).map(HeaderValue::as_bytes).unwrap_or_default();
    // The key is 16 random bytes in base64: 24 characters.
    if key.len() != 24 {
        return Err((StatusCode::BAD_REQUEST, "Sec-WebSocket-Key must be 16 bytes in base64"));
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key);
    HeaderValue::from_str(&accept).map_err(|_| (StatusCode::BAD_REQUEST, "bad Sec-WebSocket-Key"))
}

/// Whether a comma-separated header holds `token` (any case).
fn has_token(headers: &HeaderMap, name: hyper::header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}
