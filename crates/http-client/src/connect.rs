//! Opening a connection in three steps, each with its own error: resolve
//! the name, connect over TCP, and for HTTPS the TLS handshake, checking
//! the certificate against the system's roots and the `ca_file`.

use crate::error::{Error, ErrorKind};
use crate::outgoing::Origin;
use crate::settings::Settings;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::cell::Cell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Where a request is, for the message of a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Waiting for a connection slot (`max_connections`).
    Slot,
    Dns,
    Connect,
    Tls,
    /// Request sent (or being sent), answer's head not complete.
    Head,
    Body,
}

impl Step {
    pub fn doing(self) -> &'static str {
        match self {
            Step::Slot => "waiting for a free connection (max_connections)",
            Step::Dns => "resolving the host name",
            Step::Connect => "connecting",
            Step::Tls => "in the TLS handshake",
            Step::Head => "waiting for the answer's head",
            Step::Body => "reading the answer's body",
        }
    }
}

/// The certificates of a PEM file; at least one.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("'{}': {e}", path.display()))?;
    match certs.is_empty() {
        true => Err(format!("'{}': no certificate in it (PEM expected)", path.display())),
        false => Ok(certs),
    }
}

/// The TLS client: the trusted roots and HTTP/1.1 by ALPN.
pub fn tls_connector(s: &Settings) -> Result<TlsConnector, String> {
    let mut roots = rustls::RootCertStore::empty();
    if s.system_roots {
        let found = rustls_native_certs::load_native_certs();
        if let Some(e) = found.errors.first() {
            tracing::warn!("http_client: reading the system's certificates: {e}");
        }
        let (_, ignored) = roots.add_parsable_certificates(found.certs);
        if ignored > 0 {
            tracing::debug!("http_client: {ignored} system certificates could not be parsed");
        }
    }
    if let Some(path) = &s.ca_file {
        for cert in read_ca_file(path)? {
            roots.add(cert).map_err(|e| format!("ca_file '{}': {e}", path.display()))?;
        }
    }
    if roots.is_empty() {
        tracing::warn!("http_client: no trusted certificate: every HTTPS request will fail");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Resolves, connects and (HTTPS) shakes hands; `step` says how far it got.
pub async fn connect(origin: &Origin, tls: &TlsConnector, step: &Cell<Step>) -> Result<Stream, Error> {
    step.set(Step::Dns);
    let bare = origin.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, origin.port)],
        Err(_) => tokio::net::lookup_host((bare, origin.port))
            .await
            .map_err(|e| Error::new(ErrorKind::Dns, format!("cannot resolve '{bare}': {e}")))?
            .collect(),
    };
    if addrs.is_empty() {
        return Err(Error::new(ErrorKind::Dns, format!("'{bare}' resolves to no address")));
    }
    step.set(Step::Connect);
    let mut last = None;
    let mut tcp = None;
    for addr in &addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let tcp = match (tcp, last) {
        (Some(s), _) => s,
        (None, Some((addr, e))) => {
            return Err(Error::new(ErrorKind::Connect, format!("cannot connect to {origin} ({addr}): {e}")))
        }
        (None, None) => unreachable!("at least one address was tried"),
    };
    let _ = tcp.set_nodelay(true);
    if !origin.https {
        return Ok(Stream::Plain(tcp));
    }
    step.set(Step::Tls);
    let name = ServerName::try_from(bare.to_string())
        .map_err(|_| Error::new(ErrorKind::BadRequest, format!("'{bare}' is not a valid TLS server name")))?;
    match tls.connect(name, tcp).await {
        Ok(s) => Ok(Stream::Tls(Box::new(s))),
        Err(e) => Err(Error::new(ErrorKind::Tls, format!("TLS handshake with {origin} failed: {e}"))),
    }
}

/// A connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
