//! The exporter's thread: batch, convert, send, count.

use crate::convert::span_data;
use cumulo_config::trace::Tracing;
use cumulo_trace::{Next, Recorder, Spans};
use opentelemetry::InstrumentationScope;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SpanExporter as _;
use opentelemetry_sdk::Resource;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The running exporter; dropping it leaves the thread to end by itself
/// once every recorder is gone.
pub struct Exporter {
    /// Disconnected when the thread has ended (its sender dropped), which
    /// gives `flush` a join with a time limit: std's `JoinHandle` has none.
    ended: mpsc::Receiver<()>,
    endpoint: String,
}

impl Exporter {
    /// Where spans go, for the log line at start.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends what is queued (every recorder must be gone), waiting at most
    /// `limit`: at a clean stop, the last spans are not lost.
    pub fn flush(self, limit: Duration) {
        let _ = self.ended.recv_timeout(limit);
    }
}

/// Starts the exporter's thread and returns the recorder the cores record
/// into. Errors only for an exporter or a thread that cannot start.
pub fn start(settings: &Tracing) -> Result<(Recorder, Exporter), String> {
    let sampler = cumulo_trace::Sampler::new(settings.sample_ratio);
    let (recorder, spans) =
        cumulo_trace::channel(settings.section.max_queue_spans, settings.section.max_queue_bytes, sampler);
    let exporter = spawn(settings, spans)?;
    Ok((recorder, exporter))
}

fn spawn(settings: &Tracing, spans: Spans) -> Result<Exporter, String> {
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary);
    let section = &settings.section;
    if let Some(endpoint) = &section.endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    if let Some(ms) = section.export_timeout_ms {
        builder = builder.with_timeout(Duration::from_millis(ms));
    }
    // The hyper client needs a runtime of its own, on this thread: the
    // event loops never run an export.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tracing: cannot start the exporter's runtime: {e}"))?;
    let mut exporter = {
        let _in = runtime.enter();
        builder.build().map_err(|e| format!("tracing: cannot build the OTLP exporter: {e}"))?
    };
    exporter.set_resource(&Resource::builder_empty().with_service_name(settings.service_name.clone()).build());
    let endpoint = section.endpoint.clone().unwrap_or_else(endpoint_from_env);
    let scope = InstrumentationScope::builder("cumulo").with_version(env!("CARGO_PKG_VERSION")).build();
    let (max_batch, delay) = (section.max_batch, Duration::from_millis(section.batch_delay_ms));
    let (ended_tx, ended) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("cumulo-otlp".into())
        .spawn(move || {
            let _ended = ended_tx; // dropped as the thread ends, panicking or not
            let mut batch = Vec::with_capacity(max_batch);
            let mut closed = false;
            while !closed {
                // Fill a batch: until it is full, or `delay` after its first
                // span; the last one when every recorder is gone.
                let mut first = None;
                while batch.len() < max_batch {
                    let wait = first.map_or(delay, |at: Instant| delay.saturating_sub(at.elapsed()));
                    match spans.next(wait) {
                        Next::Span(span) => {
                            first.get_or_insert_with(Instant::now);
                            batch.push(span_data(span, &scope));
                        }
                        Next::Waited if batch.is_empty() => {}
                        Next::Waited => break,
                        Next::Closed => {
                            closed = true;
                            break;
                        }
                    }
                }
                if batch.is_empty() {
                    continue;
                }
                let n = batch.len() as u64;
                let sent = runtime.block_on(exporter.export(std::mem::take(&mut batch)));
                let counters = spans.counters();
                match sent {
                    Ok(()) => counters.exported.fetch_add(n, Relaxed),
                    Err(e) => {
                        tracing::debug!(target: "cumulo::tracing", "span export failed: {e}");
                        counters.failed.fetch_add(n, Relaxed)
                    }
                };
            }
        })
        .map_err(|e| format!("tracing: cannot start the exporter's thread: {e}"))?;
    Ok(Exporter { ended, endpoint })
}

/// The endpoint the exporter reads from the environment, as it resolves it
/// (for the log line only).
fn endpoint_from_env() -> String {
    if let Ok(url) = std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return url;
    }
    match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(base) => format!("{}/v1/traces", base.trim_end_matches('/')),
        Err(_) => cumulo_config::trace::DEFAULT_ENDPOINT.into(),
    }
}
