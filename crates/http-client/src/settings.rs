//! The settings of `internal = "http_client"` (docs/CONFIG.md).

use std::path::PathBuf;
use std::time::Duration;

/// Largest answer body kept by default, bytes: half the core's default
/// frame (8 MiB), so headers and framing always fit beside it.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 4 << 20;
/// Most redirects a request may ask to follow.
pub const MAX_REDIRECTS: u32 = 20;

#[derive(Debug, Clone)]
pub struct Settings {
    pub max_response_bytes: u64,
    /// Open connections, idle and busy, to all hosts together.
    pub max_connections: usize,
    /// Open connections, idle and busy, to one origin (scheme, host, port).
    pub max_connections_per_host: usize,
    pub max_idle_per_host: usize,
    pub idle_timeout: Duration,
    /// Redirects followed when the request does not say.
    pub max_redirects: u32,
    pub ca_file: Option<PathBuf>,
    pub system_roots: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_connections: 256,
            max_connections_per_host: 64,
            max_idle_per_host: 16,
            idle_timeout: Duration::from_secs(30),
            max_redirects: 0,
            ca_file: None,
            system_roots: true,
        }
    }
}

const KNOWN: &[&str] = &[
    "max_response_bytes",
    "max_connections",
    "max_connections_per_host",
    "max_idle_per_host",
    "idle_timeout_ms",
    "max_redirects",
    "ca_file",
    "system_roots",
];

impl Settings {
    /// Reads and checks the settings; the CA file is read too, so a missing
    /// or empty one is refused at load, not at the first HTTPS request.
    pub fn from_settings(t: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("http_client: {k}: unknown setting (known: {})", KNOWN.join(", ")));
        }
        let int = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, String> {
            match t.get(key) {
                None => Ok(default),
                Some(toml::Value::Integer(n)) if (min as i64..=max as i64).contains(n) => Ok(*n as u64),
                Some(_) => Err(format!("http_client: {key}: must be an integer in {min} ..= {max}")),
            }
        };
        let d = Settings::default();
        let max_response_bytes = int("max_response_bytes", d.max_response_bytes, 1, 1 << 30)?;
        let max_connections = int("max_connections", d.max_connections as u64, 1, 65_536)? as usize;
        // Unset, these are at most max_connections; set over it, refused.
        let per_host_default = d.max_connections_per_host.min(max_connections) as u64;
        let max_connections_per_host = int("max_connections_per_host", per_host_default, 1, 65_536)? as usize;
        if max_connections_per_host > max_connections {
            return Err(format!(
                "http_client: max_connections_per_host: {max_connections_per_host} is over max_connections ({max_connections})"
            ));
        }
        let idle_default = d.max_idle_per_host.min(max_connections_per_host) as u64;
        let max_idle_per_host = int("max_idle_per_host", idle_default, 0, 65_536)? as usize;
        if max_idle_per_host > max_connections_per_host {
            return Err(format!(
                "http_client: max_idle_per_host: {max_idle_per_host} is over max_connections_per_host \
                 ({max_connections_per_host})"
            ));
        }
        let idle_timeout = Duration::from_millis(int("idle_timeout_ms", 30_000, 1, 3_600_000)?);
        let max_redirects = int("max_redirects", 0, 0, MAX_REDIRECTS as u64)? as u32;
        let system_roots = match t.get("system_roots") {
            None => true,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err("http_client: system_roots: must be true or false".into()),
        };
        let ca_file = match t.get("ca_file") {
            None => None,
            Some(toml::Value::String(s)) => {
                let path = PathBuf::from(s);
                crate::connect::read_ca_file(&path).map_err(|e| format!("http_client: ca_file: {e}"))?;
                Some(path)
            }
            Some(_) => return Err("http_client: ca_file: must be a path (a string)".into()),
        };
        if !system_roots && ca_file.is_none() {
            return Err("http_client: system_roots: false needs a ca_file (no certificate could be trusted)".into());
        }
        Ok(Settings {
            max_response_bytes,
            max_connections,
            max_connections_per_host,
            max_idle_per_host,
            idle_timeout,
            max_redirects,
            ca_file,
            system_roots,
        })
    }
}
