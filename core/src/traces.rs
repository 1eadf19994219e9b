//! `[tracing]`: starts the span exporter when the section is there (and
//! not turned off), before any shard, so that every shard records into one
//! bounded channel (docs/TRACING.md).

use cumulo_config::Config;
use std::time::Duration;

/// How long a stopping core waits for its last spans to be sent.
pub const FLUSH_LIMIT: Duration = Duration::from_secs(2);

pub fn start(cfg: &Config) -> anyhow::Result<Option<(cumulo_otlp::Recorder, cumulo_otlp::Exporter)>> {
    let Some(settings) = cfg.tracing.as_ref().and_then(|t| t.resolve(|k| std::env::var(k).ok())) else {
        return Ok(None);
    };
    let (recorder, exporter) = cumulo_otlp::start(&settings).map_err(anyhow::Error::msg)?;
    tracing::info!(
        "tracing: spans to {} (OTLP/HTTP), {}% of new traces sampled, service.name {}",
        exporter.endpoint(),
        settings.sample_ratio * 100.0,
        settings.service_name
    );
    Ok(Some((recorder, exporter)))
}
