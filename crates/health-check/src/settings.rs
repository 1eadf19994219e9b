//! The settings of `internal = "health_check"` (docs/HEALTH_CHECK.md).

use std::path::PathBuf;
use std::time::Duration;

/// What is checked of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `url`: resolve, connect, (TLS), `GET`, and the status expected.
    Http { url: String, expect_status: u16 },
    /// `tcp = "host:port"`: resolve and connect.
    Tcp { host: String, port: u16 },
}

#[derive(Debug, Clone)]
pub struct Host {
    /// How it is named in hosts.json and notifications (default: the
    /// `url` or `tcp` value).
    pub name: String,
    pub target: Target,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub hosts: Vec<Host>,
    pub interval: Duration,
    /// One check's limit, all steps together.
    pub timeout: Duration,
    /// Failed checks in a row before a host is down.
    pub down_after: u32,
    /// Names sent a request when a host goes down and when it comes back.
    pub notify: Vec<String>,
    pub ca_file: Option<PathBuf>,
}

/// Most hosts one instance watches.
pub const MAX_HOSTS: usize = 1024;

const KNOWN: &[&str] = &["hosts", "interval_ms", "timeout_ms", "down_after", "notify", "ca_file"];
const HOST_KEYS: &[&str] = &["name", "url", "tcp", "expect_status"];

fn err(field: &str, why: impl std::fmt::Display) -> String {
    format!("health_check: {field}: {why}")
}

impl Settings {
    pub fn from_settings(t: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(err(k, format!("unknown setting (known: {})", KNOWN.join(", "))));
        }
        let int = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, String> {
            match t.get(key) {
                None => Ok(default),
                Some(toml::Value::Integer(n)) if (min as i64..=max as i64).contains(n) => Ok(*n as u64),
                Some(_) => Err(err(key, format!("must be an integer in {min} ..= {max}"))),
            }
        };
        let interval = Duration::from_millis(int("interval_ms", 5000, 10, 86_400_000)?);
        let timeout = Duration::from_millis(int("timeout_ms", 2000, 1, 600_000)?);
        if timeout > interval {
            return Err(err("timeout_ms", "must not be over interval_ms (one check at a time per host)"));
        }
        let down_after = int("down_after", 1, 1, 1000)? as u32;
        let notify = match t.get("notify") {
            None => Vec::new(),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) if s.starts_with('/') => Ok(s.to_string()),
                    _ => Err(err("notify", "must be a list of service names, each starting with '/'")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(err("notify", "must be a list of service names")),
        };
        let ca_file = match t.get("ca_file") {
            None => None,
            Some(toml::Value::String(s)) => Some(PathBuf::from(s)),
            Some(_) => return Err(err("ca_file", "must be a path (a string)")),
        };
        let hosts = match t.get("hosts") {
            Some(toml::Value::Array(a)) if !a.is_empty() && a.len() <= MAX_HOSTS => {
                a.iter().enumerate().map(|(i, h)| host(i, h)).collect::<Result<Vec<_>, _>>()?
            }
            _ => return Err(err("hosts", format!("required: a list of 1 ..= {MAX_HOSTS} tables with url or tcp"))),
        };
        let mut names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(err("hosts", format!("two hosts named '{}' (set name)", w[0])));
        }
        let s = Settings { hosts, interval, timeout, down_after, notify, ca_file };
        s.client_settings()?;
        Ok(s)
    }

    /// The HTTP client's settings: no idle connection kept, so that every
    /// check connects anew.
    pub fn client_settings(&self) -> Result<cumulo_http_client::Settings, String> {
        let mut t = toml::Table::new();
        t.insert("max_idle_per_host".into(), 0.into());
        t.insert("max_connections".into(), (self.hosts.len().max(1) as i64).into());
        if let Some(p) = &self.ca_file {
            t.insert("ca_file".into(), p.display().to_string().into());
        }
        cumulo_http_client::Settings::from_settings(&t).map_err(|e| e.replacen("http_client:", "health_check:", 1))
    }
}

fn host(i: usize, v: &toml::Value) -> Result<Host, String> {
    let field = |k: &str| format!("hosts[{i}].{k}");
    let Some(t) = v.as_table() else { return Err(err(&format!("hosts[{i}]"), "must be a table")) };
    if let Some(k) = t.keys().find(|k| !HOST_KEYS.contains(&k.as_str())) {
        return Err(err(&field(k), format!("unknown key (known: {})", HOST_KEYS.join(", "))));
    }
    let text = |k: &str| -> Result<Option<String>, String> {
        match t.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(err(&field(k), "must be a non-empty string")),
        }
    };
    let expect_status = match t.get("expect_status") {
        None => 200,
        Some(toml::Value::Integer(n)) if (100..=599).contains(n) => *n as u16,
        Some(_) => return Err(err(&field("expect_status"), "must be an HTTP status, 100 ..= 599")),
    };
    let (shown, target) = match (text("url")?, text("tcp")?) {
        (Some(url), None) => {
            cumulo_http_client::parse_url(&url).map_err(|e| err(&field("url"), e.why()))?;
            (url.clone(), Target::Http { url, expect_status })
        }
        (None, Some(tcp)) => {
            if t.contains_key("expect_status") {
                return Err(err(&field("expect_status"), "only for a url"));
            }
            let (host, port) = tcp
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.trim_start_matches('[').trim_end_matches(']'), p.parse::<u16>().ok()?)))
                .filter(|(h, p)| !h.is_empty() && *p > 0)
                .ok_or_else(|| err(&field("tcp"), format!("'{tcp}' is not host:port")))?;
            (tcp.clone(), Target::Tcp { host: host.to_string(), port })
        }
        _ => return Err(err(&format!("hosts[{i}]"), "needs one of url or tcp")),
    };
    Ok(Host { name: text("name")?.unwrap_or(shown), target })
}
