//! The queue's settings (`[service.settings]` of an `internal = "queue"`
//! service), checked when the config is loaded: an unknown key or a bad
//! value is an error that names it.

use cumulo_service::Status;
use std::path::PathBuf;
use std::time::Duration;

/// Every key, for the error that names an unknown one.
const KNOWN: &[&str] = &[
    "backend",
    "dir",
    "mode",
    "sync",
    "sync_interval_ms",
    "retry",
    "retry_delay_ms",
    "retry_backoff",
    "retry_max_delay_ms",
    "retry_jitter",
    "retry_on",
    "max_deliveries",
    "dead_letter",
    "max_dead_letters",
    "expires_ms",
    "timeout_ms",
    "dedup_window_ms",
    "max_dedup_keys",
    "max_bytes",
    "max_messages",
    "segment_bytes",
    "max_in_flight",
    "replicas",
    "stream",
];

/// Settings of the file backend only.
const FILE_ONLY: &[&str] = &["dir", "sync", "sync_interval_ms", "segment_bytes"];
/// Settings of the JetStream backend only.
const JETSTREAM_ONLY: &[&str] = &["replicas", "stream"];

/// Where the queue keeps its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A write-ahead log on local disk (`dir`).
    File,
    /// A work-queue stream on the cloud's NATS (JetStream), `replicas`
    /// copies, named `stream` (default: from the prefix).
    JetStream { replicas: u32, stream: Option<String> },
}

/// How the sender is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// With the destination's answer (the work completes even if the
    /// sender went away first), as CloudI's queue does.
    Destination,
    /// As soon as the request is on disk, with its id; the destination's
    /// answer goes to the request's `reply_to`, if it names one.
    Accepted,
}

/// When an acknowledged record is on the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// Acknowledged after fdatasync (group commit).
    Always,
    /// Acknowledged after write(2); fdatasync every interval.
    Interval(Duration),
    /// Acknowledged after write(2); the kernel writes back when it likes.
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    Constant,
    Exponential,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub backend: Backend,
    /// The log's directory (file backend).
    pub dir: PathBuf,
    pub mode: Mode,
    pub sync: Sync,
    /// Retries after a failed attempt whose status is in `retry_on`.
    pub retry: u32,
    pub retry_delay: Duration,
    pub backoff: Backoff,
    pub retry_max_delay: Duration,
    /// Share of each delay drawn at random, 0 .. 1 (0.2: ±20%).
    pub jitter: f64,
    /// Statuses retried (codes).
    pub retry_on: Vec<u16>,
    /// Attempts at most, counted across restarts (an attempt cut short by a
    /// crash of the core counts).
    pub max_deliveries: u32,
    pub dead_letter: Option<String>,
    pub max_dead_letters: u32,
    /// The longest a request may wait from its arrival; 0: no limit.
    pub expires: Duration,
    /// Each attempt's timeout; 0: the request's own timeout.
    pub timeout_ms: u32,
    pub dedup_window: Duration,
    pub max_dedup_keys: u32,
    pub max_bytes: u64,
    pub max_messages: u32,
    pub segment_bytes: u64,
    pub max_in_flight: u32,
}

/// Statuses retried unless `retry_on` says otherwise: those that say the
/// request was not done (no instance, a full queue, the instance died) and
/// a timeout (the destination may or may not have done it: at-least-once).
pub const DEFAULT_RETRY_ON: &[Status] = &[Status::Timeout, Status::NoService, Status::Crashed, Status::QueueFull];

/// Defaults, each with its unit and why.
pub mod defaults {
    /// Retries after the first attempt: CloudI's queue default is 2.
    pub const RETRY: u32 = 2;
    /// 100 ms between attempts, doubled under `exponential`.
    pub const RETRY_DELAY_MS: u64 = 100;
    /// The longest delay between attempts: 30 s.
    pub const RETRY_MAX_DELAY_MS: u64 = 30_000;
    /// ±20% so that retries after one outage do not arrive together.
    pub const RETRY_JITTER: f64 = 0.2;
    /// Dead letters kept for replay: 10,000.
    pub const MAX_DEAD_LETTERS: u32 = 10_000;
    /// Keys remembered for deduplication: 2 minutes.
    pub const DEDUP_WINDOW_MS: u64 = 120_000;
    /// At most 100,000 keys remembered (the oldest forgotten first).
    pub const MAX_DEDUP_KEYS: u32 = 100_000;
    /// 256 MiB of log on disk; the queue also holds its waiting requests in
    /// memory, so this bounds its memory too.
    pub const MAX_BYTES: u64 = 256 * 1024 * 1024;
    /// 1,000,000 requests waiting, in flight or dead.
    pub const MAX_MESSAGES: u32 = 1_000_000;
    /// 16 MiB segments: a drained segment is deleted whole.
    pub const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;
    /// 256 deliveries at once.
    pub const MAX_IN_FLIGHT: u32 = 256;
    /// fdatasync every 10 ms under `sync = "interval"`.
    pub const SYNC_INTERVAL_MS: u64 = 10;
}

/// Checks the settings of a queue without opening anything.
pub fn check_settings(t: &toml::Table) -> Result<(), String> {
    Settings::parse(t).map(drop)
}

fn status_by_name(name: &str) -> Option<Status> {
    Some(match name {
        "timeout" => Status::Timeout,
        "no_service" => Status::NoService,
        "crashed" => Status::Crashed,
        "queue_full" => Status::QueueFull,
        "service_error" => Status::ServiceError,
        "shutting_down" => Status::ShuttingDown,
        "unavailable" => Status::Unavailable,
        _ => return None,
    })
}

impl Settings {
    pub fn parse(t: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("queue: unknown setting '{k}' (known: {})", KNOWN.join(", ")));
        }
        let string = |key: &str| -> Result<Option<&str>, String> {
            match t.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(format!("queue: settings.{key} must be a string")),
            }
        };
        let int = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, String> {
            match t.get(key) {
                None => Ok(default),
                Some(toml::Value::Integer(n)) if (min as i128..=max as i128).contains(&(*n as i128)) => Ok(*n as u64),
                Some(_) => Err(format!("queue: settings.{key} must be an integer in {min} .. {max}")),
            }
        };
        let backend = match string("backend")? {
            None | Some("file") => Backend::File,
            Some("jetstream") => {
                let replicas = int("replicas", 1, 1, 5)? as u32;
                let stream = match string("stream")? {
                    None => None,
                    Some(n)
                        if !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                    {
                        Some(n.to_string())
                    }
                    Some(n) => return Err(format!("queue: settings.stream '{n}' must be letters, digits, '_' or '-'")),
                };
                Backend::JetStream { replicas, stream }
            }
            Some(other) => {
                return Err(format!("queue: settings.backend '{other}' is unknown (known: file, jetstream)"))
            }
        };
        let (wrong, which) = match backend {
            Backend::File => (JETSTREAM_ONLY, "jetstream"),
            Backend::JetStream { .. } => (FILE_ONLY, "file"),
        };
        if let Some(k) = wrong.iter().find(|k| t.contains_key(**k)) {
            return Err(format!("queue: settings.{k} is a setting of the {which} backend only"));
        }
        let dir = match (string("dir")?, &backend) {
            (Some(d), _) if !d.is_empty() => PathBuf::from(d),
            (_, Backend::JetStream { .. }) => PathBuf::new(),
            _ => return Err("queue: settings.dir is required (the directory of the queue's log)".into()),
        };
        let mode = match string("mode")? {
            None | Some("destination") => Mode::Destination,
            Some("accepted") => Mode::Accepted,
            Some(m) => return Err(format!("queue: settings.mode '{m}' is unknown (known: destination, accepted)")),
        };
        let interval = int("sync_interval_ms", defaults::SYNC_INTERVAL_MS, 1, 60_000)?;
        let sync = match string("sync")? {
            None | Some("always") => Sync::Always,
            Some("interval") => Sync::Interval(Duration::from_millis(interval)),
            Some("never") => Sync::Never,
            Some(s) => return Err(format!("queue: settings.sync '{s}' is unknown (known: always, interval, never)")),
        };
        if t.contains_key("sync_interval_ms") && !matches!(sync, Sync::Interval(_)) {
            return Err("queue: settings.sync_interval_ms needs sync = \"interval\"".into());
        }
        let retry = int("retry", defaults::RETRY as u64, 0, 1000)? as u32;
        let retry_delay = Duration::from_millis(int("retry_delay_ms", defaults::RETRY_DELAY_MS, 0, 86_400_000)?);
        let backoff = match string("retry_backoff")? {
            None | Some("constant") => Backoff::Constant,
            Some("exponential") => Backoff::Exponential,
            Some(b) => {
                return Err(format!("queue: settings.retry_backoff '{b}' is unknown (known: constant, exponential)"))
            }
        };
        // Unset, the cap is never below the delay asked for.
        let default_max = defaults::RETRY_MAX_DELAY_MS.max(retry_delay.as_millis() as u64);
        let retry_max_delay = Duration::from_millis(int("retry_max_delay_ms", default_max, 0, 86_400_000)?);
        if retry_max_delay < retry_delay {
            return Err("queue: settings.retry_max_delay_ms must be at least retry_delay_ms".into());
        }
        let jitter = match t.get("retry_jitter") {
            None => defaults::RETRY_JITTER,
            Some(toml::Value::Float(f)) if (0.0..=1.0).contains(f) => *f,
            Some(toml::Value::Integer(n)) if *n == 0 || *n == 1 => *n as f64,
            Some(_) => return Err("queue: settings.retry_jitter must be a number in 0 .. 1".into()),
        };
        let retry_on = match t.get("retry_on") {
            None => DEFAULT_RETRY_ON.iter().map(|s| s.code()).collect(),
            Some(toml::Value::Array(a)) => {
                let mut codes = Vec::new();
                for v in a {
                    let name = v.as_str().unwrap_or("");
                    let s = status_by_name(name).ok_or_else(|| {
                        format!(
                            "queue: settings.retry_on: '{name}' is not a retryable status (known: timeout, no_service, \
                             crashed, queue_full, service_error, shutting_down)"
                        )
                    })?;
                    codes.push(s.code());
                }
                codes
            }
            Some(_) => return Err("queue: settings.retry_on must be a list of status names".into()),
        };
        let max_deliveries = int("max_deliveries", retry as u64 + 1, 1, 1001)? as u32;
        let dead_letter = match string("dead_letter")? {
            None | Some("") => None,
            Some(d) if d.starts_with('/') => Some(d.to_string()),
            Some(d) => {
                return Err(format!("queue: settings.dead_letter '{d}' must be a service name starting with '/'"))
            }
        };
        let max_dead_letters = int("max_dead_letters", defaults::MAX_DEAD_LETTERS as u64, 0, 10_000_000)? as u32;
        let expires = Duration::from_millis(int("expires_ms", 0, 0, 365 * 86_400_000)?);
        let timeout_ms = int("timeout_ms", 0, 0, u32::MAX as u64)? as u32;
        let dedup_window = Duration::from_millis(int("dedup_window_ms", defaults::DEDUP_WINDOW_MS, 0, 86_400_000)?);
        let max_dedup_keys = int("max_dedup_keys", defaults::MAX_DEDUP_KEYS as u64, 0, 10_000_000)? as u32;
        let max_bytes = int("max_bytes", defaults::MAX_BYTES, 64 * 1024, 1 << 40)?;
        let max_messages = int("max_messages", defaults::MAX_MESSAGES as u64, 1, 100_000_000)? as u32;
        let segment_bytes = int("segment_bytes", defaults::SEGMENT_BYTES, 64 * 1024, 1 << 32)?;
        if segment_bytes > max_bytes {
            return Err("queue: settings.segment_bytes must be at most max_bytes".into());
        }
        let max_in_flight = int("max_in_flight", defaults::MAX_IN_FLIGHT as u64, 1, 65_536)? as u32;
        Ok(Settings {
            backend,
            dir,
            mode,
            sync,
            retry,
            retry_delay,
            backoff,
            retry_max_delay,
            jitter,
            retry_on,
            max_deliveries,
            dead_letter,
            max_dead_letters,
            expires,
            timeout_ms,
            dedup_window,
            max_dedup_keys,
            max_bytes,
            max_messages,
            segment_bytes,
            max_in_flight,
        })
    }

    /// Whether a failed attempt with `status` may be tried again.
    pub fn retries(&self, status: Status) -> bool {
        self.retry_on.contains(&status.code())
    }
}
