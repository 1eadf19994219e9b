//! HTTPS and WSS: the gateway's listener speaks TLS 1.2 or 1.3 when
//! `tls_cert` and `tls_key` are set (docs/GATEWAY.md, TLS).
//!
//! The certificate is chosen per handshake by [`Certificate`], which a
//! watcher thread replaces when either file changes on disk: new
//! connections get the new one, open connections keep the session they
//! have. A file that does not load (half written, a key that does not match
//! the certificate) is logged and the certificate in use stays.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};
use tokio_rustls::TlsAcceptor;

/// How often the watcher looks at the files' modification times: two
/// `stat` calls, off the event loop.
pub const RELOAD_POLL: Duration = Duration::from_secs(1);

/// Largest certificate or key file read, bytes: a chain of a few
/// certificates is a few KiB.
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// Failed handshakes of every gateway of the core (plaintext to the TLS
/// port, an unknown CA, a timeout): `cumulo_http_tls_handshake_failures_total`.
static HANDSHAKE_FAILURES: AtomicU64 = AtomicU64::new(0);

pub fn count_handshake_failure() {
    HANDSHAKE_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// The `cumulo_http_tls_*` series of `GET /metrics`.
pub fn render(p: &mut cumulo_router::PromText) {
    let name = "cumulo_http_tls_handshake_failures_total";
    p.header(
        name,
        "counter",
        "TLS handshakes the HTTP gateways did not complete (not TLS, refused by either side, or past header_timeout_ms).",
    );
    p.sample(name, &[], HANDSHAKE_FAILURES.load(Ordering::Relaxed));
}

/// The certificate and key files as configured (absolute once the config
/// file's folder is applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads and checks both files: a chain of at least one certificate and a
/// private key that matches its first one.
pub fn load(files: &Files) -> Result<CertifiedKey, String> {
    let cert_pem = read(&files.cert, "tls_cert")?;
    let key_pem = read(&files.key, "tls_key")?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem).collect::<Result<Vec<_>, _>>().map_err(|e| {
        format!("http: settings.tls_cert {}: not PEM certificates: {}", files.cert.display(), pem_problem(e))
    })?;
    if chain.is_empty() {
        return Err(format!("http: settings.tls_cert {}: holds no CERTIFICATE block", files.cert.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!("http: settings.tls_key {}: no usable PEM private key: {}", files.key.display(), pem_problem(e))
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| {
        format!(
            "http: settings.tls_key {} does not go with settings.tls_cert {}: {e}",
            files.key.display(),
            files.cert.display()
        )
    })
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

fn read(path: &Path, key: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let at = |e: std::io::Error| format!("http: settings.{key} {}: cannot read it: {e}", path.display());
    let mut bytes = Vec::new();
    std::fs::File::open(path).map_err(at)?.take(MAX_PEM_FILE + 1).read_to_end(&mut bytes).map_err(at)?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(format!("http: settings.{key} {}: over {MAX_PEM_FILE} bytes", path.display()));
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

/// One gateway's TLS: the acceptor for its connections, and the watcher
/// that keeps its certificate current.
pub struct Tls {
    pub acceptor: TlsAcceptor,
    certificate: Arc<Certificate>,
    files: Files,
}

impl Tls {
    /// Loads the files now: a gateway whose certificate does not load does
    /// not start.
    pub fn new(files: Files) -> Result<Tls, String> {
        let certificate = Arc::new(Certificate(RwLock::new(Arc::new(load(&files)?))));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("http: TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(certificate.clone());
        // The gateway serves HTTP/1.1 only (hyper's http1).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { acceptor: TlsAcceptor::from(Arc::new(config)), certificate, files })
    }

    /// Starts the thread that reloads the certificate when its files
    /// change. It ends once the gateway (its last acceptor) is gone.
    pub fn watch(&self) {
        let (weak, files) = (Arc::downgrade(&self.certificate), self.files.clone());
        let spawned = std::thread::Builder::new().name("http-tls-reload".into()).spawn(move || watch(weak, files));
        if let Err(e) = spawned {
            tracing::warn!(
                "http: cannot start the TLS certificate watcher ({e}); the certificate will not be reloaded"
            );
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
    let mut seen = (stamp(&files.cert), stamp(&files.key));
    loop {
        std::thread::sleep(RELOAD_POLL);
        let Some(current) = certificate.upgrade() else { return };
        let now = (stamp(&files.cert), stamp(&files.key));
        if now == seen {
            continue;
        }
        // Remembered even when the load fails: a bad file is logged once,
        // and tried again when either file changes next.
        seen = now;
        match load(&files) {
            Ok(new) => {
                *current.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
                tracing::info!("http: TLS certificate reloaded from {}", files.cert.display());
            }
            Err(why) => tracing::warn!("http: TLS certificate not reloaded, the previous one stays in use: {why}"),
        }
    }
}
