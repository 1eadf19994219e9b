//! One check of one host: resolve its name, connect, and for a URL send a
//! `GET` and compare the status; the first step that fails names the cause.

use crate::settings::Target;
use cumulo_http_client::{Client, ErrorKind, Outgoing};
use cumulo_service::info;
use std::time::Duration;
use tokio::time::Instant;

/// Why a check failed: a cause as the http_client service names it
/// (`dns`, `connect`, `tls`, `timeout`, ...) or `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: &'static str,
    pub why: String,
}

/// Runs one check within `timeout`; how long it took when it passed.
pub async fn check(target: &Target, client: &Client, timeout: Duration) -> Result<Duration, Failure> {
    let start = Instant::now();
    let deadline = start + timeout;
    match target {
        Target::Http { url, expect_status } => {
            let out = Outgoing::from_request("get", &info::encode(&[("url", url.as_str())]), b"", 0)
                .map_err(|e| Failure { kind: e.kind().name(), why: e.why().to_string() })?;
            match client.send(out, deadline).await {
                Ok(a) if a.status == *expect_status => Ok(start.elapsed()),
                Ok(a) => Err(Failure {
                    kind: "status",
                    why: format!("{url}: status {}, expected {expect_status}", a.status),
                }),
                Err(e) => Err(Failure { kind: e.kind().name(), why: e.why().to_string() }),
            }
        }
        Target::Tcp { host, port } => match tokio::time::timeout_at(deadline, tcp(host, *port)).await {
            Ok(Ok(())) => Ok(start.elapsed()),
            Ok(Err(f)) => Err(f),
            Err(_) => Err(Failure {
                kind: ErrorKind::Timeout.name(),
                why: format!("{host}:{port}: no connection within {} ms", timeout.as_millis()),
            }),
        },
    }
}

async fn tcp(host: &str, port: u16) -> Result<(), Failure> {
    let addrs: Vec<_> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Failure { kind: ErrorKind::Dns.name(), why: format!("cannot resolve '{host}': {e}") })?
        .collect();
    let mut last = None;
    for addr in &addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(_) => return Ok(()),
            Err(e) => last = Some(format!("cannot connect to {host}:{port} ({addr}): {e}")),
        }
    }
    Err(match last {
        Some(why) => Failure { kind: ErrorKind::Connect.name(), why },
        None => Failure { kind: ErrorKind::Dns.name(), why: format!("'{host}' resolves to no address") },
    })
}
