//! TLS to a core's TCP listener (`core.tcp_tls_cert`): rustls, verifying
//! the core's certificate against the CA file the program names
//! (`CUMULO_TLS_CA`) only, with an optional client certificate for a core
//! that asks for one (`CUMULO_TLS_CERT`, `CUMULO_TLS_KEY`).

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The files of a TLS connection; `ca` set means TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA(s) that signed the core's certificate (PEM).
    pub ca: Option<PathBuf>,
    /// This instance's certificate chain (PEM), for a core that requires one.
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM, PKCS#8, SEC1 or PKCS#1).
    pub key: Option<PathBuf>,
}

impl TlsFiles {
    /// `CUMULO_TLS_CA`, `CUMULO_TLS_CERT`, `CUMULO_TLS_KEY`.
    pub fn from_env() -> TlsFiles {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        TlsFiles { ca: var("CUMULO_TLS_CA"), cert: var("CUMULO_TLS_CERT"), key: var("CUMULO_TLS_KEY") }
    }
}

pub(crate) type TlsStream = StreamOwned<ClientConnection, TcpStream>;

fn problem(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(std::io::Error::other(format!("TLS: {what} {}: {e}", path.display())))
}

fn config(files: &TlsFiles, ca: &Path) -> Result<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| problem("CUMULO_TLS_CA", ca, e))? {
        let cert = cert.map_err(|e| problem("CUMULO_TLS_CA", ca, e))?;
        roots.add(cert).map_err(|e| problem("CUMULO_TLS_CA", ca, e))?;
    }
    if roots.is_empty() {
        return Err(problem("CUMULO_TLS_CA", ca, "holds no CERTIFICATE block"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Io(std::io::Error::other(format!("TLS: {e}"))))?
        .with_root_certificates(roots);
    match (&files.cert, &files.key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| problem("CUMULO_TLS_CERT", cert, e))?;
            let private = PrivateKeyDer::from_pem_file(key).map_err(|e| problem("CUMULO_TLS_KEY", key, e))?;
            builder.with_client_auth_cert(chain, private).map_err(|e| problem("CUMULO_TLS_KEY", key, e))
        }
        _ => Err(Error::Io(std::io::Error::other(
            "TLS: CUMULO_TLS_CERT and CUMULO_TLS_KEY go together: give both or neither",
        ))),
    }
}

/// The TLS session over `tcp`, its handshake finished: a certificate the
/// CA did not sign, or for another name than `host`, fails here.
pub(crate) fn connect(files: &TlsFiles, ca: &Path, host: &str, mut tcp: TcpStream) -> Result<TlsStream> {
    let config = config(files, ca)?;
    // An address in brackets ([::1]) is an IP address.
    let name = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(name.to_string())
        .map_err(|e| Error::Io(std::io::Error::other(format!("TLS: {host} is not a host name: {e}"))))?;
    let mut session = ClientConnection::new(Arc::new(config), name)
        .map_err(|e| Error::Io(std::io::Error::other(format!("TLS: {e}"))))?;
    while session.is_handshaking() {
        session.complete_io(&mut tcp).map_err(|e| Error::Io(std::io::Error::other(format!("TLS handshake: {e}"))))?;
    }
    Ok(StreamOwned::new(session, tcp))
}
