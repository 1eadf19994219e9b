//! The `[tracing]` section: OpenTelemetry spans from the core, exported
//! over OTLP/HTTP (docs/TRACING.md). Without the section nothing is
//! recorded; the standard `OTEL_*` variables fill what the section leaves
//! out (`resolve`), as every OpenTelemetry SDK reads them.

use serde::{Deserialize, Serialize};

/// Where spans go when neither the section nor the environment says: an
/// OpenTelemetry Collector's OTLP/HTTP port on this machine.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4318/v1/traces";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// false: the section is kept but nothing is recorded.
    pub enabled: bool,
    /// The collector's traces URL (OTLP/HTTP, protobuf). Unset:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`, else `DEFAULT_ENDPOINT`.
    pub endpoint: Option<String>,
    /// The share of the traces the core starts that are recorded, 0 .. 1
    /// (a request with a traceparent follows its sampled flag). Unset:
    /// `OTEL_TRACES_SAMPLER_ARG` when `OTEL_TRACES_SAMPLER` is a ratio
    /// sampler, else 1.
    pub sample_ratio: Option<f64>,
    /// `service.name` of the spans. Unset: `OTEL_SERVICE_NAME`, else "cumulo".
    pub service_name: Option<String>,
    /// Whether the core starts a trace for a request that carries no
    /// trace context (from a client or service that does not trace).
    /// false, the default: traces start at the edges, the gateway and each
    /// cron firing, and wherever an application starts one; internal
    /// traffic without context costs nothing then.
    pub start_traces: bool,
    /// Spans waiting for the exporter, at most (count and bytes); more are
    /// dropped and counted (`cumulo_trace_spans_dropped_total`).
    pub max_queue_spans: usize,
    pub max_queue_bytes: usize,
    /// Spans per export request, at most.
    pub max_batch: usize,
    /// How long a span may wait for its batch to fill, ms.
    pub batch_delay_ms: u64,
    /// One export request's limit, ms. Unset: `OTEL_EXPORTER_OTLP_TIMEOUT`
    /// rules as the exporter reads them, else 10 s.
    pub export_timeout_ms: Option<u64>,
}

impl Default for TracingConfig {
    fn default() -> Self {
        TracingConfig {
            enabled: true,
            endpoint: None,
            sample_ratio: None,
            service_name: None,
            start_traces: false,
            max_queue_spans: 2048,
            max_queue_bytes: 4 << 20,
            max_batch: 512,
            batch_delay_ms: 1000,
            export_timeout_ms: None,
        }
    }
}

/// The settings in force: the section as written, and what the
/// environment or the defaults decided for the two values it may leave out.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracing {
    /// Its `endpoint` None: the exporter reads `OTEL_EXPORTER_OTLP_*` itself.
    pub section: TracingConfig,
    pub sample_ratio: f64,
    pub service_name: String,
}

impl TracingConfig {
    /// The settings in force, reading the environment through `env`; None
    /// when tracing is off (`enabled = false`, or `OTEL_SDK_DISABLED=true`).
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Option<Tracing> {
        if !self.enabled || env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        let sample_ratio = self.sample_ratio.unwrap_or_else(|| {
            let sampler = env("OTEL_TRACES_SAMPLER").unwrap_or_default();
            match sampler.as_str() {
                "always_off" | "parentbased_always_off" => 0.0,
                "traceidratio" | "parentbased_traceidratio" => {
                    env("OTEL_TRACES_SAMPLER_ARG").and_then(|a| a.trim().parse().ok()).unwrap_or(1.0)
                }
                _ => 1.0,
            }
        });
        let service_name = self.service_name.clone().or_else(|| env("OTEL_SERVICE_NAME")).unwrap_or("cumulo".into());
        Some(Tracing { section: self.clone(), sample_ratio, service_name })
    }
}

pub(crate) fn validate(t: &TracingConfig) -> Result<(), (String, String)> {
    let err = |f: &str, r: &str| Err((format!("tracing.{f}"), r.to_string()));
    if let Some(r) = t.sample_ratio {
        if !(0.0..=1.0).contains(&r) {
            return err("sample_ratio", "must be 0 .. 1");
        }
    }
    if let Some(e) = &t.endpoint {
        if !(e.starts_with("http://") || e.starts_with("https://")) || url::Url::parse(e).is_err() {
            return err("endpoint", "must be an http:// or https:// URL (the collector's /v1/traces)");
        }
    }
    if !(1..=1_000_000).contains(&t.max_queue_spans) {
        return err("max_queue_spans", "must be 1 .. 1000000");
    }
    if !(64 << 10..=1 << 30).contains(&t.max_queue_bytes) {
        return err("max_queue_bytes", "must be 64 KiB .. 1 GiB");
    }
    if !(1..=t.max_queue_spans).contains(&t.max_batch) {
        return err("max_batch", "must be 1 .. max_queue_spans");
    }
    if !(1..=60_000).contains(&t.batch_delay_ms) {
        return err("batch_delay_ms", "must be 1 .. 60000");
    }
    if t.export_timeout_ms.is_some_and(|ms| !(100..=600_000).contains(&ms)) {
        return err("export_timeout_ms", "must be 100 .. 600000");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_fills_what_the_section_leaves_out() {
        let env = |k: &str| match k {
            "OTEL_TRACES_SAMPLER" => Some("parentbased_traceidratio".to_string()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("0.01".to_string()),
            "OTEL_SERVICE_NAME" => Some("shop".to_string()),
            _ => None,
        };
        let t = TracingConfig::default().resolve(env).unwrap();
        assert_eq!((t.sample_ratio, t.service_name.as_str()), (0.01, "shop"));
        let mine = TracingConfig { sample_ratio: Some(0.5), service_name: Some("edge".into()), ..Default::default() };
        let t = mine.resolve(env).unwrap();
        assert_eq!((t.sample_ratio, t.service_name.as_str()), (0.5, "edge"));
        assert!(TracingConfig::default().resolve(|k| (k == "OTEL_SDK_DISABLED").then(|| "true".into())).is_none());
        assert!(TracingConfig { enabled: false, ..Default::default() }.resolve(|_| None).is_none());
    }

    #[test]
    fn bad_values_are_refused_with_their_field() {
        let bad = TracingConfig { sample_ratio: Some(2.0), ..Default::default() };
        assert_eq!(validate(&bad).unwrap_err().0, "tracing.sample_ratio");
        let bad = TracingConfig { endpoint: Some("localhost:4318".into()), ..Default::default() };
        assert_eq!(validate(&bad).unwrap_err().0, "tracing.endpoint");
        assert!(validate(&TracingConfig::default()).is_ok());
    }
}
