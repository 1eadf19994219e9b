//! The `cumulo` binary: the daemon and its command line.

use clap::{CommandFactory, Parser, Subcommand};
use cumulo_core::admin::LogControl;
use cumulo_core::cli::{self, help, AdminArgs, QueuesCommand, ResiliencyCommand, ServicesCommand, SubscriptionsArgs};
use cumulo_core::internal::settings::CATALOGUE;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
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
    #[arg(long, global = true, env = "CUMULO_LOG", default_value = "info", help_heading = "Logging")]
    log_level: String,
    /// Log format.
    #[arg(long, global = true, value_enum, default_value = "text", help_heading = "Logging")]
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
    #[command(after_help = help::RELOAD)]
    Check {
        #[arg(short, long)]
        config: PathBuf,
        /// Also ask the core running here (its admin API: from the file's
        /// [admin], CUMULO_ADMIN, CUMULO_ADMIN_TOKEN) what reloading its
        /// config file would do, changing nothing.
        #[arg(long)]
        diff: bool,
    },
    /// Apply the edited config file to the running core: services added,
    /// removed, updated in place (live options) or replaced; nothing changes
    /// when the file is invalid or changes [core], [admin], [cluster],
    /// [[client]] or [acl] (those need a restart). SIGHUP does the same.
    #[command(after_help = help::RELOAD)]
    Reload {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Operate the services of a running core (through its admin API).
    #[command(after_help = help::SERVICES)]
    Services {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: ServicesCommand,
    },
    /// The patterns a running core routes, with the instances and services
    /// subscribing each (--prefix, --service to narrow).
    #[command(after_help = help::SUBSCRIPTIONS)]
    Subscriptions {
        #[command(flatten)]
        args: SubscriptionsArgs,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Summary of a running core: services, instances, requests.
    #[command(after_help = help::STATUS)]
    Status {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// The nodes of the cloud a running core is in: name, node_id, state,
    /// last heartbeat, subscriptions, requests in flight there.
    #[command(after_help = help::NODES)]
    Nodes {
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// The durable queues of a running core (depth, deliveries, dead
    /// letters), and their dead letters: list, replay, purge.
    #[command(after_help = help::QUEUES)]
    Queues {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: Option<QueuesCommand>,
    },
    /// The resiliency policies of a running core: circuit breakers (with
    /// their state), ejected instances, retry counters; reset breakers,
    /// replace the policies.
    #[command(after_help = help::RESILIENCY)]
    Resiliency {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: Option<ResiliencyCommand>,
    },
    /// Change a running core's log level (e.g. debug, or "info,cumulo_router::routing=debug").
    #[command(after_help = help::LOG_LEVEL)]
    LogLevel {
        /// error, warn, info, debug, trace, or per-module directives.
        level: String,
        #[command(flatten)]
        admin: AdminArgs,
    },
    /// Measure a service or an HTTP endpoint under load: a fixed rate, or the
    /// highest stable one, with a latency report (docs/LOADGEN.md).
    Bench(cumulo_loadgen::BenchArgs),
    /// Print the shell completion script of cumulo (subcommands, options,
    /// their values) for SHELL to standard output.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        /// The shell the script is written for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page of cumulo (roff) to standard output, or write
    /// one page per command into a folder.
    #[command(after_help = MAN_EXAMPLES)]
    Man {
        /// Write cumulo.1 and cumulo-<command>.1 (one per subcommand, e.g.
        /// cumulo-services-add.1) into DIR, created if missing, instead.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Write a new service in one of the SDK languages, and print how to
    /// build it and the [[service]] lines that run it under a core.
    #[command(after_help = help::NEW)]
    New(cli::NewArgs),
}

const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  cumulo completions bash > ~/.local/share/bash-completion/completions/cumulo
  cumulo completions zsh > \"${fpath[1]}/_cumulo\"     (then start a new zsh)
  cumulo completions fish > ~/.config/fish/completions/cumulo.fish
  source <(cumulo completions bash)                 this shell only

The Debian package installs the bash, zsh and fish scripts (docs/OPERATIONS.md).";

const MAN_EXAMPLES: &str = "\
Examples:
  cumulo man | man -l -                          read the main page now
  cumulo man --out-dir man1                      cumulo.1, cumulo-run.1, cumulo-services-add.1, ...
  MANPATH=$PWD: man cumulo-services-add          (with the pages in ./man1)

The Debian package installs every page under /usr/share/man/man1.";

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
  cumulo services list                          the services of the core running here
  cumulo services add more.toml                 add the [[service]] tables of a file
  cumulo services show 3                        service 3: patterns it subscribes, processes, configuration
  cumulo services update 3 --count-process 4    run more processes of service 3
  cumulo services remove 3                      stop service 3 gracefully
  cumulo subscriptions --prefix /tests/         the patterns routed under /tests/, and who serves them
  cumulo log-level debug                        more detail, without a restart
  cumulo reload                                 apply the edited config file (as SIGHUP does)
  cumulo queues                                 the durable queues: depth, deliveries, dead letters
  cumulo queues replay --queue /queue/          send a queue's dead letters again
  cumulo resiliency                             policies, circuit breakers, ejected instances
  (client commands reach http://127.0.0.1:7311, or --admin URL / CUMULO_ADMIN,
   with --token / CUMULO_ADMIN_TOKEN, or the [admin] section of --config FILE)
  cumulo bench request --socket S --name N      the highest stable request rate of a service
  cumulo new python hello                       a new service in ./hello, and how to run it

A minimal config:
  [core]
  socket = \"/tmp/cumulo.sock\"

  [[service]]
  prefix = \"/tests/http_req/\"
  path = \"target/release/http_req\"   # any program using a cumulo SDK
  count_process = 2
  count_thread = 1

Docs: README.md, docs/CONFIG.md, docs/ADMIN.md, proto/PROTOCOL.md";

/// Installs the log subscriber with a filter the admin API can swap
/// (`PUT /v1/log-level`) while the core runs.
fn init_logs(level: &str, format: LogFormat) -> LogControl {
    use tracing_subscriber::{layer::SubscriberExt, reload, util::SubscriberInitExt, EnvFilter, Layer};
    let (filter, level) = match EnvFilter::try_new(level) {
        Ok(f) => (f, level.to_string()),
        Err(e) => {
            eprintln!("cumulo: invalid --log-level '{level}': {e}; using info");
            (EnvFilter::new("info"), "info".to_string())
        }
    };
    let (filter, handle) = reload::Layer::new(filter);
    let colour = use_colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR"));
    let output = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer().with_ansi(colour).with_writer(std::io::stderr).boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer().json().with_writer(std::io::stderr).boxed(),
    };
    // Behind the filter: the dashboard's live log shows what the log shows.
    let recent = cumulo_core::admin::recent_logs::layer();
    tracing_subscriber::registry().with(filter).with(output).with(recent).init();
    LogControl::new(&level, move |new| {
        let f = EnvFilter::try_new(new).map_err(|e| format!("invalid log filter '{new}': {e}"))?;
        handle.reload(f).map_err(|e| format!("cannot change the log filter: {e}"))
    })
}

/// Colour (ANSI escapes) only for a person reading a terminal: a log file
/// or a pipe gets plain text, and `NO_COLOR` (any non-empty value, as
/// no-color.org defines it) turns colour off everywhere.
fn use_colour(stderr_is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// `cumulo man`: the main page on standard output, or every page into
/// `out_dir`.
fn man(out_dir: Option<&Path>) -> ExitCode {
    let cmd = Cli::command();
    let written = match out_dir {
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout().lock()),
        Some(dir) => std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)),
    };
    let place = out_dir.map_or("standard output".into(), Path::to_string_lossy);
    done_writing(written, "the manual pages", &place)
}

/// The exit status of `completions` and `man`: a reader that stopped early
/// (`cumulo man | head`) is no error.
fn done_writing(written: std::io::Result<()>, what: &str, place: &str) -> ExitCode {
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("cumulo: cannot write {what} to {place}: {e}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Prints a client command's output, or its error on stderr with exit 1.
fn client_done(outcome: cli::Outcome) -> ExitCode {
    match outcome {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cumulo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The Unix socket a config file gives its core (for `cumulo bench
/// request --config`, which starts a core of its own).
fn socket_of_config(path: &std::path::Path) -> anyhow::Result<String> {
    Ok(cumulo_config::Config::load(path, &CATALOGUE)?.socket_path().display().to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Services { admin, command } => return client_done(cli::services(&admin, command)),
        Command::Subscriptions { args, admin } => return client_done(cli::subscriptions(&admin, args)),
        Command::Status { admin } => return client_done(cli::status(&admin)),
        Command::Nodes { admin } => return client_done(cli::nodes(&admin)),
        Command::Queues { admin, command } => return client_done(cli::queues(&admin, command)),
        Command::Resiliency { admin, command } => return client_done(cli::resiliency(&admin, command)),
        Command::LogLevel { level, admin } => return client_done(cli::log_level(&admin, &level)),
        Command::Reload { admin } => return client_done(cli::reload(&admin, false)),
        Command::Completions { shell } => {
            // Into memory first: clap_complete panics when a write fails
            // (a reader that stopped early).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "cumulo", &mut script);
            let written = std::io::Write::write_all(&mut std::io::stdout().lock(), &script);
            return done_writing(written, "the completion script", "standard output");
        }
        Command::Man { out_dir } => return man(out_dir.as_deref()),
        Command::New(args) => return client_done(cli::scaffold::new(args)),
        _ => {}
    }
    let log = init_logs(&cli.log_level, cli.log_format);
    match cli.command {
        Command::Bench(args) => cumulo_loadgen::main(args, socket_of_config),
        Command::Check { config, diff } => match cumulo_config::Config::load(&config, &CATALOGUE) {
            Ok(cfg) if let Err(e) = cumulo_core::daemon::check(&cfg) => {
                eprintln!("cumulo: {}: {e:#}", config.display());
                ExitCode::FAILURE
            }
            Ok(cfg) => {
                println!("{}: valid ({} services)", config.display(), cfg.services.len());
                if !diff {
                    return ExitCode::SUCCESS;
                }
                let admin = AdminArgs {
                    admin: std::env::var("CUMULO_ADMIN").ok(),
                    token: std::env::var("CUMULO_ADMIN_TOKEN").ok(),
                    token_file: std::env::var_os("CUMULO_ADMIN_TOKEN_FILE").map(PathBuf::from),
                    config: Some(config.clone()),
                    output: cli::Output::Text,
                };
                client_done(cli::reload(&admin, true))
            }
            Err(e) => {
                eprintln!("cumulo: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run { config } => {
            let cfg = match cumulo_config::Config::load(&config, &CATALOGUE) {
                Ok(cfg) => cfg,
                Err(e) => {
                    tracing::error!("{e}");
                    return ExitCode::FAILURE;
                }
            };
            match cumulo_core::daemon::run_with(cfg, log) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Services { .. }
        | Command::Subscriptions { .. }
        | Command::Status { .. }
        | Command::Nodes { .. }
        | Command::Queues { .. }
        | Command::Resiliency { .. }
        | Command::LogLevel { .. }
        | Command::Reload { .. }
        | Command::Completions { .. }
        | Command::Man { .. }
        | Command::New(_) => {
            unreachable!("handled above")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::use_colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_colour(true, None));
        assert!(use_colour(true, Some("".into())), "an empty NO_COLOR is unset");
        assert!(!use_colour(true, Some("1".into())));
        assert!(!use_colour(false, None), "a file or a pipe gets no escapes");
        assert!(!use_colour(false, Some("1".into())));
    }
}
