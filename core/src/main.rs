//! The `cumulo` binary: the daemon and its command line.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// cumulo: a polyglot service cloud.
///
/// cumulo starts services written in any language, routes requests between
/// them by name, restarts them when they die, and reports what happened.
/// Services are listed in a TOML config file (see docs/CONFIG.md).
#[derive(Parser)]
#[command(name = "cumulo", version, after_help = EXAMPLES)]
struct Cli {
    /// Log filter: error, warn, info, debug, trace, or per-module directives
    /// (e.g. "info,cumulo::routing=debug").
    #[arg(long, global = true, env = "CUMULO_LOG", default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the core with the services of a config file (runs until SIGTERM/SIGINT).
    Run {
        /// The config file (TOML).
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Check a config file and exit: 0 if valid, 1 with the file, field and reason if not.
    Check {
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Measure a service or an HTTP endpoint under load: a fixed rate, or the
    /// highest stable one, with a latency report (docs/LOADGEN.md).
    Bench(cumulo_core::loadgen::cli::BenchArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

const EXAMPLES: &str = "\
Examples:
  cumulo run --config examples/cumulo.toml      start the core and the example services
  cumulo check --config my.toml                 validate a config without starting anything
  CUMULO_LOG=debug cumulo run -c my.toml        more detail (connections, subscriptions)
  cumulo bench request --socket S --name N      the highest stable request rate of a service

A minimal config:
  [core]
  socket = \"/tmp/cumulo.sock\"

  [[service]]
  prefix = \"/tests/http_req/\"
  path = \"target/release/http_req\"   # any program using a cumulo SDK
  count_process = 2
  count_thread = 1

Docs: README.md, docs/CONFIG.md, proto/PROTOCOL.md";

fn init_logs(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|e| {
        eprintln!("cumulo: invalid --log-level '{level}': {e}; using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logs(&cli.log_level, cli.log_format);
    match cli.command {
        Command::Bench(args) => cumulo_core::loadgen::cli::main(args),
        Command::Check { config } => match cumulo_core::config::Config::load(&config) {
            Ok(cfg) => {
                println!("{}: valid ({} services)", config.display(), cfg.services.len());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("cumulo: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run { config } => {
            let cfg = match cumulo_core::config::Config::load(&config) {
                Ok(cfg) => cfg,
                Err(e) => {
                    tracing::error!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            match cumulo_core::daemon::run(cfg) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
