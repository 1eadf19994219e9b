//! The settings of `internal = "cron"` (docs/CONFIG.md), checked whole at
//! load: an error names its field (`job[1] (nightly).schedule`) and why.

use crate::expr::Expression;
use crate::zone::{next_after, zone_named};
use crate::CronError;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// At most this many jobs per service: each is a task and a timer.
pub const MAX_JOBS: usize = 1000;
/// The longest job name, in bytes (it travels in request_info and in the
/// queue's idempotency key).
pub const MAX_NAME_LEN: usize = 64;
/// At most this many bytes of request and request_info per job (the
/// request_info keys cron adds not counted): what a job sends is
/// configuration, not data.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

const KNOWN: &[&str] = &["timezone", "via", "job"];
const KNOWN_JOB: &[&str] = &["name", "schedule", "dest", "mcast", "request_info", "request", "timeout_ms", "priority"];

pub struct Settings {
    pub timezone: TimeZone,
    /// The zone as configured (`utc`, `local (Etc/UTC)`, `Europe/London`).
    pub timezone_name: String,
    /// A queue's prefix that each event goes through, deduplicated by
    /// `<prefix><job>:<unix seconds>` (once per cloud with JetStream).
    pub via: Option<String>,
    pub jobs: Vec<Job>,
}

pub struct Job {
    pub name: String,
    pub schedule: Expression,
    pub dest: String,
    pub mcast: bool,
    /// request_info as configured, encoded (`key\0value\0...`).
    pub request_info: Vec<u8>,
    pub request: Vec<u8>,
    /// 0: the time until the job's next event.
    pub timeout_ms: u32,
    pub priority: i8,
}

impl Settings {
    pub fn from_settings(t: &toml::Table) -> Result<Settings, CronError> {
        Settings::read(t)
    }

    fn read(t: &toml::Table) -> Result<Settings, CronError> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(CronError::new(k.as_str(), format!("unknown setting (known: {})", KNOWN.join(", "))));
        }
        let timezone_name = match t.get("timezone") {
            None => "utc".to_string(),
            Some(toml::Value::String(s)) => s.clone(),
            Some(_) => return Err(CronError::new("timezone", "must be a string: \"utc\", \"local\" or an IANA name")),
        };
        let timezone = zone_named(&timezone_name).map_err(|e| CronError::new("timezone", e))?;
        // Say which zone "local" turned out to be.
        let timezone_name = match (timezone_name.as_str(), timezone.iana_name()) {
            ("local", Some(name)) => format!("local ({name})"),
            _ => timezone_name,
        };
        let via = match t.get("via") {
            None => None,
            Some(toml::Value::String(s)) if s.starts_with('/') && s.ends_with('/') && !has_wildcard(s) => {
                Some(s.clone())
            }
            Some(_) => return Err(CronError::new("via", "must be a queue service's prefix, e.g. \"/queue/\"")),
        };
        let jobs = match t.get("job") {
            Some(toml::Value::Array(a)) if !a.is_empty() => a,
            Some(toml::Value::Array(_)) | None => {
                return Err(CronError::new("job", "at least one job is required ([[service.settings.job]])"))
            }
            Some(_) => return Err(CronError::new("job", "must be an array of tables")),
        };
        if jobs.len() > MAX_JOBS {
            return Err(CronError::new("job", format!("{} jobs: at most {MAX_JOBS}", jobs.len())));
        }
        let mut out: Vec<Job> = Vec::with_capacity(jobs.len());
        for (i, j) in jobs.iter().enumerate() {
            let job = Job::from_table(j, i, via.is_some(), &timezone)?;
            if out.iter().any(|o| o.name == job.name) {
                return Err(CronError::new(format!("job[{i}].name"), format!("'{}' is used twice", job.name)));
            }
            out.push(job);
        }
        Ok(Settings { timezone, timezone_name, via, jobs: out })
    }
}

impl Job {
    fn from_table(v: &toml::Value, i: usize, via: bool, zone: &TimeZone) -> Result<Job, CronError> {
        let Some(t) = v.as_table() else {
            return Err(CronError::new(format!("job[{i}]"), "must be a table"));
        };
        let label = match t.get("name").and_then(|n| n.as_str()) {
            Some(n) => format!("job[{i}] ({n})"),
            None => format!("job[{i}]"),
        };
        let err = |key: &str, reason: String| CronError::new(format!("{label}.{key}"), reason);
        if let Some(k) = t.keys().find(|k| !KNOWN_JOB.contains(&k.as_str())) {
            return Err(err(k, format!("unknown setting (known: {})", KNOWN_JOB.join(", "))));
        }
        let string = |key: &str, required: bool| -> Result<Option<String>, CronError> {
            match t.get(key) {
                None if required => Err(err(key, "is required".into())),
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(err(key, "must be a string".into())),
            }
        };
        let name = string("name", true)?.unwrap_or_default();
        if name.is_empty()
            || name.len() > MAX_NAME_LEN
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            return Err(err("name", format!("must be 1 to {MAX_NAME_LEN} of A-Z a-z 0-9 _ . -")));
        }
        let text = string("schedule", true)?.unwrap_or_default();
        // Through a queue every node must pick the same random values (`~`),
        // or their events would differ and each be done: the values follow
        // from the job's name and schedule.
        let mut rng = if via { fastrand::Rng::with_seed(fnv1a(&[&name, &text])) } else { fastrand::Rng::new() };
        let schedule = Expression::parse_with(&text, &mut rng).map_err(|e| e.within(&format!("{label}.schedule")))?;
        // A schedule that matches no date at all is a mistake; one whose
        // times are all past (a year gone by) loads, idle, so that a config
        // keeps loading as time goes on.
        if next_after(&schedule, Timestamp::UNIX_EPOCH, zone).is_none() {
            return Err(err(
                "schedule",
                format!("'{text}' matches no date (such as February 30): it would never fire"),
            ));
        }
        let dest = string("dest", true)?.unwrap_or_default();
        if !dest.starts_with('/') || dest.len() > 4096 || dest.contains('\0') || has_wildcard(&dest) {
            return Err(err("dest", "must be a service name: starts with '/', no '*' or '?'".into()));
        }
        let mcast = match t.get("mcast") {
            None => false,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(err("mcast", "must be true or false".into())),
        };
        if mcast && via {
            return Err(err("mcast", "cannot be true with `via`: a queue delivers to one destination".into()));
        }
        let mut request_info = Vec::new();
        match t.get("request_info") {
            None => {}
            Some(toml::Value::Table(pairs)) => {
                for (k, v) in pairs {
                    let Some(v) = v.as_str() else {
                        return Err(err("request_info", format!("'{k}' must be a string")));
                    };
                    if k.is_empty() || k.contains('\0') || v.contains('\0') {
                        return Err(err(
                            "request_info",
                            format!("'{k}': keys are not empty, keys and values have no NUL"),
                        ));
                    }
                    cumulo_service::info::push(&mut request_info, k.as_bytes(), v.as_bytes());
                }
            }
            Some(_) => {
                return Err(err("request_info", "must be a table of strings, e.g. { kind = \"nightly\" }".into()))
            }
        }
        let request = string("request", false)?.unwrap_or_default().into_bytes();
        if request.len() + request_info.len() > MAX_REQUEST_BYTES {
            return Err(err("request", format!("request and request_info are over {MAX_REQUEST_BYTES} bytes")));
        }
        let timeout_ms = match t.get("timeout_ms") {
            None => 0,
            Some(toml::Value::Integer(n)) if (0..=i64::from(u32::MAX)).contains(n) => *n as u32,
            Some(_) => return Err(err("timeout_ms", format!("must be an integer in 0 ..= {}", u32::MAX))),
        };
        let priority = match t.get("priority") {
            None => 0,
            Some(toml::Value::Integer(n)) if (-128..=127).contains(n) => *n as i8,
            Some(_) => return Err(err("priority", "must be an integer in -128 ..= 127".into())),
        };
        Ok(Job { name, schedule, dest, mcast, request_info, request, timeout_ms, priority })
    }
}

/// FNV-1a over the parts (a NUL after each): the same on every node and build.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.bytes().chain([0])) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn has_wildcard(s: &str) -> bool {
    s.contains('*') || s.contains('?')
}
