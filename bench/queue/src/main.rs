//! The programs of `bench/queue/run`, which measures cumulo's durable
//! `queue` service (a request written to an append-only log with fdatasync
//! group commit, acknowledged, then delivered) against the least a program
//! must do for the same job and against a JetStream work queue:
//!
//! - `queue-bench ceiling --dir D`: sender threads hand 1 KiB records to one
//!   writer thread, which writes everything queued in one write, makes it
//!   durable with one fdatasync, and acknowledges the batch (group commit);
//!   `--no-group` is one sender, one record per fdatasync: the raw
//!   fdatasync rate of the disk;
//! - `queue-bench cumulo --socket S --name N`: connections to a cumulo core
//!   (the Rust SDK), each keeping requests in flight to the queue; an answer
//!   with status OK is an acknowledgement;
//! - `queue-bench sink`: the service the queue delivers to (run by the
//!   core): answers OK with an empty body and counts what it received;
//! - `queue-bench jetstream --url U`: a JetStream work-queue stream (file
//!   storage, one replica), publishers awaiting each publish ack and a pull
//!   consumer acking each message.
//!
//! Each measuring mode prints one line of `key=value` figures last (rates,
//! p50 and p99 from an HDR histogram), which the script reads.

mod ceiling;
mod client;
mod jetstream;
mod sink;

use clap::{Parser, Subcommand};
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "cumulo's durable queue against its ceiling and against JetStream")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Group commit, the least the job needs: senders, one writer, one fdatasync per batch.
    Ceiling(ceiling::CeilingArgs),
    /// Requests to cumulo's queue through the Rust SDK, answers counted per status.
    Cumulo(client::ClientArgs),
    /// The destination the queue delivers to (a service run by the core).
    Sink(sink::SinkArgs),
    /// A JetStream work-queue stream: publishes awaiting their acks, a pull consumer.
    Jetstream(jetstream::JetStreamArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().mode {
        Mode::Ceiling(args) => ceiling::run(args),
        Mode::Cumulo(args) => client::run(args),
        Mode::Sink(args) => sink::run(args),
        Mode::Jetstream(args) => jetstream::run(args),
    }
}

/// The load every measuring mode shares: senders, requests in flight per
/// sender, the body size, the warm-up and the measured time.
#[derive(clap::Args, Clone, Debug)]
pub struct Load {
    /// Senders, each a thread (or a NATS connection) of its own.
    #[arg(long, default_value_t = 8)]
    pub senders: usize,
    /// Requests each sender keeps in flight.
    #[arg(long, default_value_t = 16)]
    pub in_flight: usize,
    /// Bytes of each request's body.
    #[arg(long, default_value_t = 1024)]
    pub body: usize,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds sent before the measurement starts (not counted).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
}

impl Load {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.senders >= 1, "--senders must be at least 1");
        anyhow::ensure!(self.in_flight >= 1, "--in-flight must be at least 1");
        anyhow::ensure!(self.duration > 0.0, "--duration must be above 0");
        anyhow::ensure!(self.warmup >= 0.0, "--warmup must not be negative");
        Ok(())
    }

    /// The measured window, from now: after the warm-up, for the duration.
    pub fn window(&self) -> Window {
        let from = Instant::now() + Duration::from_secs_f64(self.warmup);
        Window { from, until: from + Duration::from_secs_f64(self.duration) }
    }

    /// The body every request carries (the same bytes each time).
    pub fn body_bytes(&self) -> Vec<u8> {
        (0..self.body).map(|i| b'a' + (i % 26) as u8).collect()
    }
}

/// The measured window: an answer arriving in it is counted, and its
/// latency recorded.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub from: Instant,
    pub until: Instant,
}

impl Window {
    pub fn contains(&self, t: Instant) -> bool {
        t >= self.from && t < self.until
    }

    pub fn seconds(&self) -> f64 {
        (self.until - self.from).as_secs_f64()
    }
}

/// Latencies recorded from 1 us to 60 s with 3 significant digits, as the
/// other benchmarks' programs do.
const HISTOGRAM_MAX_US: u64 = 60_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HISTOGRAM_MAX_US, 3).expect("valid histogram bounds")
}

/// Records `d` in microseconds, clamped to the histogram's range.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_micros().clamp(1, HISTOGRAM_MAX_US as u128) as u64);
}

/// `p50_us=.. p99_us=.. max_us=..` of a histogram (0 when it is empty).
pub fn latency_fields(h: &Histogram<u64>) -> String {
    if h.is_empty() {
        return "p50_us=0 p99_us=0 max_us=0".into();
    }
    format!("p50_us={} p99_us={} max_us={}", h.value_at_quantile(0.50), h.value_at_quantile(0.99), h.max())
}
