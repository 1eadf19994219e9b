//! `http`: the HTTP gateway. An HTTP/1.1 server inside the core that turns
//! each request into a service request (`GET /a/b?x=1` → name `/a/b/get`,
//! request `x\01\0`, headers in request_info), sends it with `send_sync`,
//! and answers with the service's response (status and headers from
//! response_info). Settings and mapping: docs/GATEWAY.md.
//!
//! The listening socket is bound when the service is created, so a bad
//! address or a port in use stops the core at start with a clear error,
//! instead of a gateway that silently never answers.

mod access_log;
mod allow;
mod deadlines;
mod errors;
mod file_body;
mod framing;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod gateway;
mod listening;
mod names;
mod park;
mod request;
mod response;
mod security_headers;
mod server;
mod server_span;
mod settings;
mod websocket;

use cumulo_service::ServiceApi;

pub use settings::check as check_settings;
use settings::Settings;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
pub use websocket::{shared as websocket_table, CloseReason, Table as WebSocketTable};

/// Pending connections the kernel keeps before `accept`: a burst of new
/// clients waits there instead of being dropped and retried a second later.
const LISTEN_BACKLOG: i32 = 4096;

pub struct HttpGateway {
    settings: Settings,
    listener: std::net::TcpListener,
    access_log: Option<access_log::Sink>,
    /// Set when `tls_cert` and `tls_key` are: loaded now, so that a bad
    /// certificate stops the core at start like a bad port.
    tls: Option<cumulo_tls::Tls>,
}

impl HttpGateway {
    pub fn from_settings(table: &toml::Table) -> Result<HttpGateway, String> {
        let mut settings = Settings::from_settings(table)?;
        let access_log = access_log::open_sink(&settings.access_log)?;
        let tls = settings.tls.clone().map(|files| cumulo_tls::Tls::new(files, None)).transpose()?;
        let listener = bind(&settings)?;
        // Unset: the whole story on loopback (a developer's own machine),
        // hidden wherever the public may connect.
        let loopback = listener.local_addr().is_ok_and(|a| a.ip().is_loopback());
        let by_address = if loopback { settings::ErrorDetail::Public } else { settings::ErrorDetail::Hidden };
        settings.error_detail.get_or_insert(by_address);
        Ok(HttpGateway { settings, listener, access_log, tls })
    }
}

impl HttpGateway {
    /// Serves until the core stops, as the instance `api`.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let log = match self.access_log {
            None => None,
            Some(sink) => match access_log::AccessLog::start(&self.settings.access_log, sink) {
                Ok(log) => Some(log),
                Err(e) => return tracing::error!("http: cannot start the access log writer: {e}"),
            },
        };
        let gateway = gateway::Gateway::new(api, &self.settings, log);
        if let Some(tls) = &self.tls {
            tls.watch();
        }
        server::serve(self.listener, gateway, self.settings, self.tls).await
    }
}

fn bind(s: &Settings) -> Result<std::net::TcpListener, String> {
    let addr = settings::listen_address(s)?;
    listen(addr).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            " (another program, or a second instance of this gateway: keep count_process and count_thread at 1)"
        } else {
            ""
        };
        format!("http: cannot listen on {}:{}: {e}{hint}", s.address, s.port)
    })
}

/// Set when the core runs several shards (`core.threads` > 1): each shard
/// binds the gateway's port with SO_REUSEPORT and the kernel spreads new
/// connections among them. Read once per bind, never on a request.
static SHARE_PORTS: AtomicBool = AtomicBool::new(false);

/// Lets every shard bind the gateways' ports (see [`SHARE_PORTS`]).
pub fn share_ports_across_shards() {
    SHARE_PORTS.store(true, Ordering::Relaxed);
}

fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // A restarted core can bind again while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    if SHARE_PORTS.load(Ordering::Relaxed) {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
