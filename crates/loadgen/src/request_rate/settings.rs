//! The settings of `internal = "request_rate"` (docs/LOADGEN.md), checked
//! with the field and the reason when they are wrong.

use crate::answer::RequestSpec;
use crate::controller::DynamicSettings;
use crate::payload;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Settings {
    pub spec: RequestSpec,
    /// None: dynamic.
    pub rate: Option<f64>,
    pub dynamic: DynamicSettings,
    pub tick: Duration,
    pub timeout: Duration,
    /// Most requests outstanding per instance.
    pub inflight_max: usize,
    /// Where to write each report as JSON (overwritten each time).
    pub report_file: Option<PathBuf>,
}

const KNOWN: &[&str] = &[
    "service_name",
    "request_info",
    "request",
    "response_check",
    "request_rate",
    "tick_length",
    "tick_stable_count",
    "timeout_ms",
    "inflight_max",
    "rate_start",
    "rate_max",
    "rate_probe",
    "latency_limit_ms",
    "report_file",
];

fn err(field: &str, why: &str) -> String {
    format!("request_rate: settings.{field} {why}")
}

fn positive(t: &toml::Table, field: &str) -> Result<Option<f64>, String> {
    match t.get(field) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i > 0 => Ok(Some(*i as f64)),
        Some(toml::Value::Float(f)) if f.is_finite() && *f > 0.0 => Ok(Some(*f)),
        Some(_) => Err(err(field, "must be a positive number")),
    }
}

fn whole(t: &toml::Table, field: &str, min: i64, max: i64) -> Result<Option<i64>, String> {
    match t.get(field) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if (min..=max).contains(i) => Ok(Some(*i)),
        Some(_) => Err(err(field, &format!("must be a whole number {min} .. {max}"))),
    }
}

/// A length of time: milliseconds, or a string like "5s".
fn millis(t: &toml::Table, field: &str) -> Result<Option<Duration>, String> {
    match t.get(field) {
        None => Ok(None),
        Some(toml::Value::Integer(i)) if *i > 0 => Ok(Some(Duration::from_millis(*i as u64))),
        Some(toml::Value::String(s)) => payload::duration(s).map(Some).map_err(|e| err(field, &e)),
        Some(_) => Err(err(field, "must be milliseconds (a positive whole number) or a string like \"5s\"")),
    }
}

impl Settings {
    pub fn parse(t: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("request_rate: unknown setting '{k}' (known: {})", KNOWN.join(", ")));
        }
        let name = match t.get("service_name") {
            Some(toml::Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => return Err(err("service_name", "must be a non-empty string")),
            None => return Err(err("service_name", "is required: the name to send requests to")),
        };
        let request_info = t
            .get("request_info")
            .map(|v| payload::from_toml("request_rate: settings.request_info", v))
            .transpose()?
            .unwrap_or_default();
        let request = t
            .get("request")
            .map(|v| payload::from_toml("request_rate: settings.request", v))
            .transpose()?
            .unwrap_or_default();
        let check = match t.get("response_check") {
            None => None,
            Some(toml::Value::String(s)) => Some(s.as_bytes().to_vec()),
            Some(_) => return Err(err("response_check", "must be a string (a substring every response must contain)")),
        };
        let rate = match t.get("request_rate") {
            None => None,
            Some(toml::Value::String(s)) if s == "dynamic" => None,
            Some(toml::Value::Integer(i)) if *i > 0 => Some(*i as f64),
            Some(toml::Value::Float(f)) if f.is_finite() && *f > 0.0 => Some(*f),
            Some(_) => return Err(err("request_rate", "must be a positive number (requests/second) or \"dynamic\"")),
        };
        let tick = millis(t, "tick_length")?.unwrap_or(Duration::from_secs(5));
        if tick < Duration::from_millis(100) {
            return Err(err("tick_length", "must be at least 100 ms"));
        }
        let stable_ticks = whole(t, "tick_stable_count", 1, 100_000)?.unwrap_or(24) as u32;
        let timeout_ms = whole(t, "timeout_ms", 1, u32::MAX as i64)?.unwrap_or(5_000) as u32;
        let inflight_max = whole(t, "inflight_max", 1, 1 << 24)?.unwrap_or(1024) as usize;
        let mut dynamic = DynamicSettings { stable_ticks, ..Default::default() };
        if let Some(r) = positive(t, "rate_start")? {
            dynamic.start_rate = r;
        }
        dynamic.max_rate = positive(t, "rate_max")?;
        dynamic.probe = match t.get("rate_probe") {
            None => true,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(err("rate_probe", "must be true or false")),
        };
        dynamic.latency_limit =
            whole(t, "latency_limit_ms", 1, u32::MAX as i64)?.map(|ms| Duration::from_millis(ms as u64));
        let report_file = match t.get("report_file") {
            None => None,
            Some(toml::Value::String(s)) if !s.is_empty() => Some(PathBuf::from(s)),
            Some(_) => return Err(err("report_file", "must be a file path")),
        };
        Ok(Settings {
            spec: RequestSpec { name, request_info, request, timeout_ms, check },
            rate,
            dynamic,
            tick,
            timeout: Duration::from_millis(timeout_ms as u64),
            inflight_max,
            report_file,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, String> {
        Settings::parse(&toml::from_str(text).unwrap())
    }

    #[test]
    fn defaults_and_every_field() {
        let s = parse("service_name = \"/tests/http_req/rust.xml/get\"").unwrap();
        assert_eq!(
            (s.rate, s.tick, s.dynamic.stable_ticks, s.spec.timeout_ms, s.inflight_max),
            (None, Duration::from_secs(5), 24, 5000, 1024)
        );
        let s = parse(
            r#"service_name = "/a/b"
            request_info = { k = "v" }
            request = { value = 42 }
            response_check = "<value>42</value>"
            request_rate = 1500
            tick_length = "1s"
            tick_stable_count = 3
            timeout_ms = 2000
            inflight_max = 16
            rate_start = 50
            rate_max = 9000.5
            rate_probe = false
            latency_limit_ms = 20
            report_file = "/tmp/r.json""#,
        )
        .unwrap();
        assert_eq!(s.rate, Some(1500.0));
        assert_eq!(s.spec.request, b"value\x0042\x00");
        assert_eq!(s.spec.request_info, b"k\x00v\x00");
        assert_eq!(s.tick, Duration::from_secs(1));
        assert_eq!((s.dynamic.start_rate, s.dynamic.max_rate, s.dynamic.probe), (50.0, Some(9000.5), false));
        assert_eq!(s.dynamic.latency_limit, Some(Duration::from_millis(20)));
        assert_eq!(
            parse("service_name = \"/a\"\nrequest_rate = \"dynamic\"\ntick_length = 250").unwrap().tick,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn bad_settings_name_the_field() {
        for (text, field) in [
            ("", "service_name"),
            ("service_name = 3", "service_name"),
            ("service_name = \"/a\"\nrequest_rate = \"fast\"", "request_rate"),
            ("service_name = \"/a\"\nrequest_rate = -1", "request_rate"),
            ("service_name = \"/a\"\ntick_length = 10", "tick_length"),
            ("service_name = \"/a\"\ntick_stable_count = 0", "tick_stable_count"),
            ("service_name = \"/a\"\nrequest = [1, 2]", "request"),
            ("service_name = \"/a\"\ncolour = 1", "colour"),
            ("service_name = \"/a\"\nrate_probe = 1", "rate_probe"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(field), "{text}: {e}");
        }
    }
}
