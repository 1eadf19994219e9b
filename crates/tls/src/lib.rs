//! TLS 1.2 and 1.3 for the core's listeners: the HTTP gateway's (HTTPS and
//! WSS, `tls_cert` and `tls_key`, docs/GATEWAY.md) and the TCP listener for
//! instances (`core.tcp_tls_cert`, `core.tcp_tls_key`, optionally
//! `core.tcp_tls_client_ca` for client certificates, docs/SECURITY.md).
//!
//! The certificate is chosen per handshake by [`Certificate`], which a
//! watcher thread replaces when either file changes on disk or the core
//! gets SIGHUP ([`request_reload`]): new connections get the new one, open
//! connections keep the session they have. A file that does not load (half
//! written, a key that does not match the certificate) is logged and the
//! certificate in use stays.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};
use tokio_rustls::TlsAcceptor;

/// A server-side TLS connection over `IO`, as the listeners hold one.
pub type ServerStream<IO> = tokio_rustls::server::TlsStream<IO>;

/// How often the watcher looks at the files' modification times: two
/// `stat` calls, off the event loop.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// Largest certificate or key file read, bytes: a chain of a few
/// certificates is a few KiB.
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// Failed handshakes of every gateway of the core (plaintext to the TLS
/// port, an unknown CA, a timeout): `cumulo_http_tls_handshake_failures_total`.
static HTTP_HANDSHAKE_FAILURES: AtomicU64 = AtomicU64::new(0);
/// The same for the TCP listener for instances:
/// `cumulo_tcp_tls_handshake_failures_total`.
static TCP_HANDSHAKE_FAILURES: AtomicU64 = AtomicU64::new(0);
/// Bumped by SIGHUP: every watcher reloads its files at its next look,
/// changed or not.
static RELOAD_REQUESTS: AtomicU64 = AtomicU64::new(0);

/// Which listener a TLS setting belongs to: names its settings in errors
/// and logs, and picks its failure counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// An HTTP gateway: `http: settings.tls_cert`, `.tls_key`.
    Http,
    /// The TCP listener for instances: `core.tcp_tls_cert`, `.tcp_tls_key`.
    Tcp,
}

impl Listener {
    /// A setting's key: `settings.tls_cert`, `core.tcp_tls_key`.
    fn key(self, which: &str) -> String {
        match self {
            Listener::Http => format!("settings.tls_{which}"),
            Listener::Tcp => format!("core.tcp_tls_{which}"),
        }
    }

    /// A setting as errors and logs name it (a gateway's with `http: `).
    fn setting(self, which: &str) -> String {
        match self {
            Listener::Http => format!("http: {}", self.key(which)),
            Listener::Tcp => self.key(which),
        }
    }

    fn failures(self) -> &'static AtomicU64 {
        match self {
            Listener::Http => &HTTP_HANDSHAKE_FAILURES,
            Listener::Tcp => &TCP_HANDSHAKE_FAILURES,
        }
    }

    pub fn count_handshake_failure(self) {
        self.failures().fetch_add(1, Ordering::Relaxed);
    }
}

/// Asks every certificate watcher to reload its files now (SIGHUP).
pub fn request_reload() {
    RELOAD_REQUESTS.fetch_add(1, Ordering::Relaxed);
}

/// TLS handshakes the listeners of this kind did not complete, since the
/// process started (`cumulo_http_tls_handshake_failures_total`,
/// `cumulo_tcp_tls_handshake_failures_total`).
pub fn handshake_failures(listener: Listener) -> u64 {
    listener.failures().load(Ordering::Relaxed)
}

/// The certificate and key files as configured (absolute once the config
/// file's folder is applied), and the listener they are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub listener: Listener,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks both files: a chain of at least one certificate and a
/// private key that matches its first one.
pub fn load(files: &Files) -> Result<CertifiedKey, String> {
    let (cert_setting, key_setting) = (files.listener.setting("cert"), files.listener.setting("key"));
    let chain = certificates(&files.cert, &cert_setting)?;
    let key_pem = read(&files.key, &key_setting)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("{key_setting} {}: no usable PEM private key: {}", files.key.display(), pem_problem(e)))?;
    let cert_name = files.listener.key("cert");
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        format!("{key_setting} {} does not go with {cert_name} {}: {e}", files.key.display(), files.cert.display())
    })
}

/// The PEM certificates of a file: at least one.
fn certificates(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, setting)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{setting} {}: not PEM certificates: {}", path.display(), pem_problem(e)))?;
    if chain.is_empty() {
        return Err(format!("{setting} {}: holds no CERTIFICATE block", path.display()));
    }
    Ok(chain)
}

/// The client certificate check of `core.tcp_tls_client_ca`: a certificate
/// from one of the file's CAs is required.
fn client_verifier(ca: &Path) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
    let setting = "core.tcp_tls_client_ca";
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca, setting)? {
        roots.add(cert).map_err(|e| format!("{setting} {}: not a usable CA certificate: {e}", ca.display()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| format!("{setting} {}: {e}", ca.display()))
}

/// The PEM parser's error in words: its own text prints the markers as
/// lists of byte values.
fn pem_problem(e: rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { end_marker } => {
            format!("no \"{}\" line after its BEGIN line", String::from_utf8_lossy(&end_marker))
        }
        Error::IllegalSectionStart { line } => format!("a bad BEGIN line: {}", String::from_utf8_lossy(&line)),
        Error::NoItemsFound => "no PEM block of that kind in it".into(),
        other => other.to_string(),
    }
}

fn read(path: &Path, setting: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let at = |e: std::io::Error| format!("{setting} {}: cannot read it: {e}", path.display());
    let mut bytes = Vec::new();
    std::fs::File::open(path).map_err(at)?.take(MAX_PEM_FILE + 1).read_to_end(&mut bytes).map_err(at)?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(format!("{setting} {}: over {MAX_PEM_FILE} bytes", path.display()));
    }
    Ok(bytes)
}

/// The certificate new handshakes get; replaced whole by the watcher.
#[derive(Debug)]
pub struct Certificate(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Certificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// One listener's TLS: the acceptor for its connections, and the watcher
/// that keeps its certificate current.
pub struct Tls {
    acceptor: TlsAcceptor,
    certificate: Arc<Certificate>,
    files: Files,
}

impl Tls {
    /// Loads the files now: a listener whose certificate does not load does
    /// not start. With `client_ca`, a client must show a certificate from
    /// one of its CAs.
    pub fn new(files: Files, client_ca: Option<&Path>) -> Result<Tls, String> {
        let certificate = Arc::new(Certificate(RwLock::new(Arc::new(load(&files)?))));
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match client_ca {
            Some(ca) => builder.with_client_cert_verifier(client_verifier(ca)?),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(certificate.clone());
        if files.listener == Listener::Http {
            // The gateway serves HTTP/1.1 only (hyper's http1).
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        Ok(Tls { acceptor: TlsAcceptor::from(Arc::new(config)), certificate, files })
    }

    /// The handshake of a new connection, under the certificate of the
    /// moment.
    pub fn accept<IO>(&self, stream: IO) -> tokio_rustls::Accept<IO>
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        self.acceptor.accept(stream)
    }

    pub fn listener(&self) -> Listener {
        self.files.listener
    }

    /// Starts the thread that reloads the certificate when its files
    /// change. It ends once the gateway (its last acceptor) is gone.
    pub fn watch(&self) {
        let (weak, files) = (Arc::downgrade(&self.certificate), self.files.clone());
        let spawned = std::thread::Builder::new().name("tls-reload".into()).spawn(move || watch(weak, files));
        if let Err(e) = spawned {
            tracing::warn!("cannot start the TLS certificate watcher ({e}); the certificate will not be reloaded");
        }
    }
}

/// What tells that a file changed: its modification time, length and inode
/// (a file renamed over it, as tools that replace certificates do).
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), m.ino()))
}

fn watch(certificate: Weak<Certificate>, files: Files) {
    let look = || (stamp(&files.cert), stamp(&files.key), RELOAD_REQUESTS.load(Ordering::Relaxed));
    let mut seen = look();
    let setting = files.listener.setting("cert");
    loop {
        std::thread::sleep(RELOAD_POLL);
        let Some(current) = certificate.upgrade() else { return };
        let now = look();
        if now == seen {
            continue;
        }
        // Remembered even when the load fails: a bad file is logged once,
        // and tried again when either file changes next or at SIGHUP.
        seen = now;
        match load(&files) {
            Ok(new) => {
                *current.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
                tracing::info!("TLS certificate of {setting} reloaded from {}", files.cert.display());
            }
            Err(why) => tracing::warn!("TLS certificate not reloaded, the previous one stays in use: {why}"),
        }
    }
}
