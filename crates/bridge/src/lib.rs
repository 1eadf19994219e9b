//! The `tcp` and `udp` internal services: bridges that turn raw socket
//! traffic into service requests. Each message (a line or a length-framed
//! message on a TCP connection, or a UDP datagram) becomes a request to the
//! name `dest`; the answer's body goes back to the peer, framed as the
//! message was. Behaviour, limits and errors: docs/BRIDGES.md; settings:
//! docs/CONFIG.md.
//!
//! It reaches the core through the service API only (`cumulo-service`). A
//! bridge subscribes nothing: its instances only send.

mod error;
mod framing;
mod listen;
mod report;
mod settings;
mod tcp;
mod udp;

pub use error::BridgeError;
pub use tcp::Tcp;
pub use udp::Udp;

use cumulo_service::{info, Response, ServiceApi, Status};
use std::future::Future;
use std::net::SocketAddr;

/// Checks `tcp`'s settings without creating it (what a config file and the
/// admin API are checked against).
pub fn check_tcp_settings(table: &toml::Table) -> Result<(), String> {
    settings::TcpSettings::from_settings(table).map(drop)
}

/// Checks `udp`'s settings without creating it.
pub fn check_udp_settings(table: &toml::Table) -> Result<(), String> {
    settings::UdpSettings::from_settings(table).map(drop)
}

/// The request_info of a peer's messages: its address, when the settings
/// ask for it.
fn connection_info(send: bool, peer: SocketAddr) -> Vec<u8> {
    let mut out = Vec::new();
    if send {
        info::push(&mut out, b"remote_addr", peer.to_string().as_bytes());
    }
    out
}

/// What the peer gets for a request: the answer's body, or
/// `error: <STATUS>` when the request failed (`error: TIMEOUT`,
/// `error: NO_SERVICE`, ...), so a failure is never silence.
fn answer_body(r: Response) -> Result<Vec<u8>, (Status, Vec<u8>)> {
    match r.status {
        Status::Ok => Ok(r.response),
        s => Err((s, format!("error: {}", s.name()).into_bytes())),
    }
}

/// Resolves when the API says this instance stops (`next_request` gives
/// `None`; a bridge subscribes nothing, so it gets no request otherwise,
/// and one that reaches it anyway is refused). The core may instead drop
/// the bridge's future, which closes its sockets and connections with it.
async fn stopped<A: ServiceApi>(api: &A) {
    while let Some(req) = api.next_request().await {
        api.return_(&req, Status::InvalidArgument, b"", b"a bridge takes no requests");
    }
}

/// Every future a bridge awaits: not `Send`, on the core's event loop.
type Pending = std::pin::Pin<Box<dyn Future<Output = Response>>>;
