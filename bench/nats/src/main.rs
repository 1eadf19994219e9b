//! NATS's own request-reply between two processes: the ceiling `bench/cluster`
//! measures the cumulo cluster against. A cumulo node sends a remote request
//! as one NATS message and gets its answer as another; this program does
//! exactly that and nothing else, with the same client library.
//!
//! - `nats-reqrep respond`: subscribes to a subject and answers every request
//!   with a fixed body;
//! - `nats-reqrep request`: keeps `--concurrency` requests in flight on one
//!   connection for `--duration`, and prints one line of `key=value` figures
//!   (requests/s, p50, p99 from an HDR histogram).

mod request;
mod respond;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "NATS request-reply between two processes, measured")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Answer every request on a subject with a fixed body.
    Respond(respond::RespondArgs),
    /// Send requests to a subject, closed loop, and report the rate and latency.
    Request(request::RequestArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // One thread, as the core's event loop has: the ceiling is what one
    // process doing only this reaches, not what a thread pool reaches.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match cli.mode {
        Mode::Respond(args) => runtime.block_on(respond::run(args)),
        Mode::Request(args) => runtime.block_on(request::run(args)),
    }
}
