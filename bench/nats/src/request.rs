//! The requester: `--concurrency` request loops on one connection (as a
//! cumulo node multiplexes its remote requests over its one NATS
//! connection), each sending its next request when its answer is back.

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// Latencies recorded from 1 us to 60 s with 3 significant digits: any
/// percentile within 0.1%, as the load generator's report.
const HISTOGRAM_MAX_US: u64 = 60_000_000;

#[derive(clap::Args)]
pub struct RequestArgs {
    /// The NATS server to connect to.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub server: String,
    /// The subject to send to.
    #[arg(long, default_value = "bench.reqrep")]
    pub subject: String,
    /// Requests in flight at once (one loop each, on one connection).
    #[arg(long, default_value_t = 48)]
    pub concurrency: usize,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds sent before the measurement starts (not counted).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// The body of every request (default: value=42 key/value encoded, as
    /// `cumulo bench request --request value=42` sends it).
    #[arg(long, default_value = "value\u{0}42\u{0}")]
    pub request: String,
    /// Request timeout in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// How long a first request may go unanswered before the run, in
    /// milliseconds: the responder may still be subscribing, or its
    /// subscription still crossing the route between two servers.
    #[arg(long, default_value_t = 10_000)]
    pub ready_wait_ms: u64,
}

/// What one request loop saw in the measured window.
struct LoopResult {
    latency_us: Histogram<u64>,
    ok: u64,
    errors: u64,
    first_error: Option<String>,
}

pub async fn run(args: RequestArgs) -> anyhow::Result<()> {
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_millis(args.timeout_ms)))
        .connect(&args.server)
        .await
        .with_context(|| format!("cannot connect to {}", args.server))?;
    let body = bytes::Bytes::from(args.request.clone().into_bytes());
    wait_ready(&client, &args.subject, &body, Duration::from_millis(args.ready_wait_ms)).await?;

    let (warmup, duration) = (Duration::from_secs_f64(args.warmup), Duration::from_secs_f64(args.duration));
    let loops: Vec<_> = (0..args.concurrency)
        .map(|_| tokio::spawn(request_loop(client.clone(), args.subject.clone(), body.clone(), warmup, duration)))
        .collect();
    let mut total = LoopResult { latency_us: new_histogram(), ok: 0, errors: 0, first_error: None };
    for handle in loops {
        let one = handle.await?;
        total.latency_us.add(&one.latency_us)?;
        total.ok += one.ok;
        total.errors += one.errors;
        total.first_error = total.first_error.or(one.first_error);
    }
    let p = |q: f64| total.latency_us.value_at_quantile(q);
    println!(
        "requests={} errors={} seconds={:.3} rps={:.1} p50_us={} p99_us={} max_us={} concurrency={} server={} subject={}",
        total.ok,
        total.errors,
        args.duration,
        total.ok as f64 / args.duration,
        p(0.50),
        p(0.99),
        total.latency_us.max(),
        args.concurrency,
        args.server,
        args.subject
    );
    if let Some(error) = total.first_error {
        eprintln!("nats-reqrep: first error: {error}");
    }
    if total.errors > 0 || total.ok == 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Until one request is answered: a subscription made on another server of
/// the cluster takes a moment to reach this one, and meanwhile requests
/// fail with "no responders".
async fn wait_ready(
    client: &async_nats::Client,
    subject: &str,
    body: &bytes::Bytes,
    wait: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        let attempt = tokio::time::timeout(wait, client.request(subject.to_string(), body.clone())).await;
        match attempt {
            Ok(Ok(_)) => return Ok(()),
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Ok(Err(error)) => bail!("no answer on {subject} within {} ms: {error}", wait.as_millis()),
            Err(_) => bail!("no answer on {subject} within {} ms", wait.as_millis()),
        }
    }
}

/// Requests one at a time for `warmup` (not counted) then `duration`,
/// counted from when this loop starts: a loop that starts late (a busy
/// machine) still measures its whole window rather than none of it.
async fn request_loop(
    client: async_nats::Client,
    subject: String,
    body: bytes::Bytes,
    warmup: Duration,
    duration: Duration,
) -> LoopResult {
    let measure_from = Instant::now() + warmup;
    let measure_until = measure_from + duration;
    let mut result = LoopResult { latency_us: new_histogram(), ok: 0, errors: 0, first_error: None };
    loop {
        let sent = Instant::now();
        if sent >= measure_until {
            return result;
        }
        let answer = client.request(subject.clone(), body.clone()).await;
        if sent < measure_from {
            continue;
        }
        match answer {
            Ok(_) => {
                result.ok += 1;
                let us = sent.elapsed().as_micros().clamp(1, HISTOGRAM_MAX_US as u128) as u64;
                result.latency_us.saturating_record(us);
            }
            Err(error) => {
                result.errors += 1;
                result.first_error.get_or_insert_with(|| error.to_string());
            }
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HISTOGRAM_MAX_US, 3).expect("valid histogram bounds")
}
