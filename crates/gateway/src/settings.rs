//! The gateway's `[service.settings]` table: defaults, types and ranges.
//! Every key is documented in docs/GATEWAY.md; an unknown key or a value of
//! the wrong type is refused with the key and what it accepts.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// Which request headers reach the service in request_info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderFilter {
    All,
    /// Lower-case names; an empty list passes none.
    Only(Vec<String>),
}

impl HeaderFilter {
    pub fn passes(&self, lower_case_name: &str) -> bool {
        match self {
            HeaderFilter::All => true,
            HeaderFilter::Only(names) => names.iter().any(|n| n == lower_case_name),
        }
    }
}

/// How a GET/HEAD/DELETE query string becomes the service request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryFormat {
    /// URL-decoded into the key/value encoding: `a=1&b=2` → `a\01\0b\02\0`.
    KeyValue,
    /// The query string's bytes as sent.
    Raw,
}

/// What a 5xx answer's body tells the client (`error_detail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorDetail {
    /// What happened (a handler's exception, where the request was), and a
    /// request id.
    Public,
    /// The HTTP reason and a request id; what happened is logged under it.
    Hidden,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AccessLogTarget {
    Off,
    Stderr,
    File(PathBuf),
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub address: String,
    pub allow_remote: bool,
    pub port: u16,
    pub method_suffix: bool,
    pub name_prefix: String,
    pub timeout_ms: u32,
    pub max_connections: usize,
    pub max_body: usize,
    pub max_headers: usize,
    pub max_header_size: usize,
    pub header_timeout_ms: u64,
    /// An idle keep-alive connection keeps hyper this long before it is
    /// parked without it (park.rs).
    pub idle_park_ms: u64,
    pub body_timeout_ms: u64,
    pub keepalive: bool,
    pub headers: HeaderFilter,
    pub access_log: AccessLogTarget,
    pub query_format: QueryFormat,
    /// None until the listener is bound: then public on a loopback address
    /// (a developer's own machine), hidden on any other (`HttpGateway`).
    pub error_detail: Option<ErrorDetail>,
    /// Path prefixes that accept a WebSocket upgrade (websocket/settings.rs).
    pub websocket: Vec<super::websocket::PathSettings>,
    /// `tls_cert` and `tls_key`: the listener speaks only TLS (tls.rs).
    pub tls: Option<cumulo_tls::Files>,
    /// Adds the browser security headers a response does not set itself
    /// (security_headers.rs).
    pub security_headers: bool,
    /// Answer with a `traceresponse` header (W3C Trace Context level 2)
    /// naming the gateway's span, when `[tracing]` is on.
    pub traceresponse: bool,
}

/// hyper's own default; asking for it explicitly would cost a heap
/// allocation per request, so it is only passed on when changed.
pub const HYPER_DEFAULT_MAX_HEADERS: usize = 100;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            address: "127.0.0.1".into(),
            allow_remote: false,
            port: 8080,
            method_suffix: true,
            name_prefix: String::new(),
            timeout_ms: 5_000,
            max_connections: 10_000,
            max_body: 1024 * 1024,
            max_headers: HYPER_DEFAULT_MAX_HEADERS,
            max_header_size: 64 * 1024,
            header_timeout_ms: 5_000,
            idle_park_ms: 20,
            body_timeout_ms: 30_000,
            keepalive: true,
            headers: HeaderFilter::All,
            access_log: AccessLogTarget::Off,
            query_format: QueryFormat::KeyValue,
            error_detail: None,
            websocket: Vec::new(),
            tls: None,
            security_headers: false,
            traceresponse: false,
        }
    }
}

const KNOWN: &[&str] = &[
    "address",
    "allow_remote",
    "port",
    "method_suffix",
    "name_prefix",
    "timeout_ms",
    "max_connections",
    "max_body",
    "max_headers",
    "max_header_size",
    "header_timeout_ms",
    "idle_park_ms",
    "body_timeout_ms",
    "keepalive",
    "headers",
    "access_log",
    "query_format",
    "error_detail",
    "websocket",
    "tls_cert",
    "tls_key",
    "security_headers",
    "traceresponse",
];

impl Settings {
    pub fn from_settings(table: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = table.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("http: unknown setting '{k}' (known: {})", KNOWN.join(", ")));
        }
        let d = Settings::default();
        let s = Settings {
            address: string(table, "address", &d.address)?,
            allow_remote: boolean(table, "allow_remote", d.allow_remote)?,
            port: integer(table, "port", d.port as i64, 0, 65_535)? as u16,
            method_suffix: boolean(table, "method_suffix", d.method_suffix)?,
            name_prefix: string(table, "name_prefix", &d.name_prefix)?,
            timeout_ms: integer(table, "timeout_ms", d.timeout_ms as i64, 1, u32::MAX as i64)? as u32,
            max_connections: integer(table, "max_connections", d.max_connections as i64, 1, 1_000_000)? as usize,
            max_body: integer(table, "max_body", d.max_body as i64, 0, 1 << 30)? as usize,
            max_headers: integer(table, "max_headers", d.max_headers as i64, 1, 10_000)? as usize,
            max_header_size: integer(table, "max_header_size", d.max_header_size as i64, 1024, 256 * 1024)? as usize,
            header_timeout_ms: integer(table, "header_timeout_ms", d.header_timeout_ms as i64, 10, 3_600_000)? as u64,
            idle_park_ms: integer(table, "idle_park_ms", d.idle_park_ms as i64, 0, 60_000)? as u64,
            body_timeout_ms: integer(table, "body_timeout_ms", d.body_timeout_ms as i64, 10, 3_600_000)? as u64,
            keepalive: boolean(table, "keepalive", d.keepalive)?,
            headers: header_filter(table)?,
            access_log: access_log(table)?,
            query_format: query_format(table)?,
            error_detail: error_detail(table)?,
            websocket: Vec::new(),
            tls: tls_files(table)?,
            security_headers: boolean(table, "security_headers", d.security_headers)?,
            traceresponse: boolean(table, "traceresponse", d.traceresponse)?,
        };
        let s = Settings { websocket: super::websocket::settings::from_settings(table, s.timeout_ms)?, ..s };
        if s.name_prefix.contains('\0') {
            return Err("http: settings.name_prefix must not contain a NUL character".into());
        }
        Ok(s)
    }
}

fn string(t: &toml::Table, key: &str, default: &str) -> Result<String, String> {
    match t.get(key) {
        None => Ok(default.to_string()),
        Some(toml::Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(format!("http: settings.{key} must be a string, not {}", v.type_str())),
    }
}

fn boolean(t: &toml::Table, key: &str, default: bool) -> Result<bool, String> {
    match t.get(key) {
        None => Ok(default),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(v) => Err(format!("http: settings.{key} must be true or false, not {}", v.type_str())),
    }
}

fn integer(t: &toml::Table, key: &str, default: i64, min: i64, max: i64) -> Result<i64, String> {
    match t.get(key) {
        None => Ok(default),
        Some(toml::Value::Integer(n)) if (min..=max).contains(n) => Ok(*n),
        Some(toml::Value::Integer(n)) => Err(format!("http: settings.{key} = {n} is out of range ({min} .. {max})")),
        Some(v) => Err(format!("http: settings.{key} must be an integer, not {}", v.type_str())),
    }
}

fn header_filter(t: &toml::Table) -> Result<HeaderFilter, String> {
    let wrong = || "http: settings.headers must be \"all\", \"none\" or a list of header names".to_string();
    match t.get("headers") {
        None => Ok(HeaderFilter::All),
        Some(toml::Value::String(s)) if s == "all" => Ok(HeaderFilter::All),
        Some(toml::Value::String(s)) if s == "none" => Ok(HeaderFilter::Only(Vec::new())),
        Some(toml::Value::Array(names)) => names
            .iter()
            .map(|n| n.as_str().map(str::to_ascii_lowercase).ok_or_else(wrong))
            .collect::<Result<Vec<_>, _>>()
            .map(HeaderFilter::Only),
        Some(_) => Err(wrong()),
    }
}

fn access_log(t: &toml::Table) -> Result<AccessLogTarget, String> {
    match t.get("access_log") {
        None | Some(toml::Value::Boolean(false)) => Ok(AccessLogTarget::Off),
        Some(toml::Value::Boolean(true)) => Ok(AccessLogTarget::Stderr),
        Some(toml::Value::String(p)) if !p.is_empty() => Ok(AccessLogTarget::File(PathBuf::from(p))),
        Some(_) => Err("http: settings.access_log must be false, true (standard error) or a file path".into()),
    }
}

fn query_format(t: &toml::Table) -> Result<QueryFormat, String> {
    match t.get("query_format") {
        None => Ok(QueryFormat::KeyValue),
        Some(toml::Value::String(s)) if s == "kv" => Ok(QueryFormat::KeyValue),
        Some(toml::Value::String(s)) if s == "raw" => Ok(QueryFormat::Raw),
        Some(_) => Err("http: settings.query_format must be \"kv\" or \"raw\"".into()),
    }
}

fn error_detail(t: &toml::Table) -> Result<Option<ErrorDetail>, String> {
    match t.get("error_detail") {
        None => Ok(None),
        Some(toml::Value::String(s)) if s == "public" => Ok(Some(ErrorDetail::Public)),
        Some(toml::Value::String(s)) if s == "hidden" => Ok(Some(ErrorDetail::Hidden)),
        Some(_) => Err("http: settings.error_detail must be \"public\" or \"hidden\"".into()),
    }
}

fn tls_files(t: &toml::Table) -> Result<Option<cumulo_tls::Files>, String> {
    let path = |key: &str| match t.get(key) {
        None => Ok(None),
        Some(toml::Value::String(p)) if !p.is_empty() => Ok(Some(PathBuf::from(p))),
        Some(_) => Err(format!("http: settings.{key} must be a file path (PEM)")),
    };
    match (path("tls_cert")?, path("tls_key")?) {
        (None, None) => Ok(None),
        (Some(cert), Some(key)) => Ok(Some(cumulo_tls::Files { cert, key, listener: cumulo_tls::Listener::Http })),
        _ => Err("http: settings.tls_cert and settings.tls_key go together: give both or neither".into()),
    }
}

/// Checks a gateway's settings without binding its socket; a certificate
/// and key that do not load refuse the file, as a bad port does.
pub fn check(table: &toml::Table) -> Result<(), String> {
    let s = Settings::from_settings(table)?;
    if let Some(files) = &s.tls {
        cumulo_tls::load(files)?;
    }
    listen_address(&s).map(drop)
}

/// The address to listen on; refuses a non-loopback one unless
/// `allow_remote` is set.
pub fn listen_address(s: &Settings) -> Result<SocketAddr, String> {
    let addr = (s.address.as_str(), s.port)
        .to_socket_addrs()
        .map_err(|e| format!("http: settings.address '{}' is not a usable address: {e}", s.address))?
        .next()
        .ok_or_else(|| format!("http: settings.address '{}' resolves to no address", s.address))?;
    if !s.allow_remote && !addr.ip().is_loopback() {
        return Err(format!(
            "http: settings.address = {} is not a loopback address; set settings.allow_remote = true to accept HTTP clients from other hosts",
            s.address
        ));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, String> {
        Settings::from_settings(&text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn defaults_when_empty() {
        let s = parse("").unwrap();
        assert_eq!((s.address.as_str(), s.port, s.timeout_ms), ("127.0.0.1", 8080, 5000));
        assert_eq!((s.max_body, s.max_connections, s.header_timeout_ms), (1 << 20, 10_000, 5000));
        assert_eq!(s.body_timeout_ms, 30_000);
        assert!(s.method_suffix && s.keepalive && !s.allow_remote);
        assert_eq!(s.headers, HeaderFilter::All);
        assert_eq!(s.access_log, AccessLogTarget::Off);
        assert_eq!(s.query_format, QueryFormat::KeyValue);
        assert_eq!(s.error_detail, None);
    }

    #[test]
    fn values_are_read() {
        let s = parse(
            "port = 9000\nheaders = [\"X-Trace\", \"accept\"]\naccess_log = \"/tmp/a.log\"\nquery_format = \"raw\"\nmethod_suffix = false",
        )
        .unwrap();
        assert_eq!(s.port, 9000);
        assert_eq!(s.headers, HeaderFilter::Only(vec!["x-trace".into(), "accept".into()]));
        assert!(s.headers.passes("x-trace") && !s.headers.passes("cookie"));
        assert_eq!(s.access_log, AccessLogTarget::File("/tmp/a.log".into()));
        assert_eq!(s.query_format, QueryFormat::Raw);
        assert!(!s.method_suffix);
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        assert!(parse("prot = 1").unwrap_err().contains("unknown setting 'prot'"));
        assert!(parse("port = 70000").unwrap_err().contains("settings.port"));
        assert!(parse("port = \"80\"").unwrap_err().contains("must be an integer"));
        assert!(parse("keepalive = 1").unwrap_err().contains("true or false"));
        assert!(parse("query_format = \"json\"").unwrap_err().contains("query_format"));
        assert!(parse("headers = 3").unwrap_err().contains("settings.headers"));
        assert!(parse("error_detail = \"none\"").unwrap_err().contains("settings.error_detail"));
        assert_eq!(parse("error_detail = \"hidden\"").unwrap().error_detail, Some(ErrorDetail::Hidden));
        assert!(parse("tls_cert = \"c.pem\"").unwrap_err().contains("give both or neither"));
        assert!(parse("tls_cert = 1\ntls_key = \"k.pem\"").unwrap_err().contains("settings.tls_cert"));
        assert!(parse("security_headers = \"yes\"").unwrap_err().contains("settings.security_headers"));
    }

    #[test]
    fn tls_and_security_headers() {
        let s = parse("tls_cert = \"/c.pem\"\ntls_key = \"/k.pem\"\nsecurity_headers = true").unwrap();
        assert_eq!(
            s.tls,
            Some(cumulo_tls::Files {
                cert: "/c.pem".into(),
                key: "/k.pem".into(),
                listener: cumulo_tls::Listener::Http
            })
        );
        assert!(s.security_headers);
        assert!(parse("").unwrap().tls.is_none() && !parse("").unwrap().security_headers);
        let e = check(&"tls_cert = \"/nonexistent/c.pem\"\ntls_key = \"/nonexistent/k.pem\"".parse().unwrap());
        assert!(e.unwrap_err().contains("cannot read it"));
    }
}
