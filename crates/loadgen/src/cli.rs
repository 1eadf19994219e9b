//! `cumulo bench`: the load generator from the command line.
//!
//! - `cumulo bench request`: service requests to a name, through a running
//!   core (`--socket`, as unmanaged instances) or a core it starts
//!   (`--config`);
//! - `cumulo bench http`: HTTP GETs to a URL over keep-alive connections.
//!
//! Both hold a fixed rate (`--rate`), search for the highest stable one
//! (`--dynamic`, the default) or go as fast as answers come back (`--max`),
//! show a progress line, print the latency report, and write `--json` and
//! `--html` reports.

use super::answer::RequestSpec;
use super::bench_report::{BenchReport, Header, Totals};
use super::controller::DynamicSettings;
use super::driver::{drive, Observer, Plan, RateMode, TickRecord, PROBE_MAX};
use super::progress::{human_us, sample_loop, Progress};
use super::recorder::SharedRecorder;
use super::{html, http_client, payload, schedule, service_client};
use anyhow::{bail, Context};
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub mode: BenchMode,
}

#[derive(clap::Subcommand)]
pub enum BenchMode {
    /// Send service requests to a name, through a cumulo core.
    Request(RequestArgs),
    /// Send HTTP GET requests to a URL over keep-alive connections.
    Http(HttpArgs),
}

const EXAMPLES: &str = "\
Examples:
  cumulo bench request --socket /tmp/c.sock --name /tests/http_req/rust.xml/get \\
      --request value=42 --check '<value>42</value>'            search the highest stable rate
  cumulo bench request --config my.toml --name /echo/x --rate 5000 --duration 20s
  cumulo bench http --url http://127.0.0.1:8080/tests/http_req/rust.xml?value=42 \\
      --connections 20000 --rate 10000 --duration 60s --html report.html

Latency is measured from when each request was due by the schedule, not
from when it was sent: a stalled target delays every request behind the
stall, and each of those counts (see docs/LOADGEN.md).";

/// How hard to push, and what to write out: the same for both modes.
#[derive(clap::Args)]
pub struct RateArgs {
    /// Hold this many requests/second (in total, over all connections).
    #[arg(long, conflicts_with_all = ["dynamic", "max"])]
    pub rate: Option<f64>,
    /// Search for the highest rate that holds without errors, timeouts or
    /// runaway latency (the default).
    #[arg(long, conflicts_with = "max")]
    pub dynamic: bool,
    /// Closed loop: each connection sends as soon as its answers are back.
    #[arg(long)]
    pub max: bool,
    /// Length of the run (fixed, max; default 30s), or the most a dynamic
    /// search may take (default 10m; at least what the search needs to end:
    /// 2 minutes by default, a few seconds with --quick).
    #[arg(long, value_parser = payload::duration)]
    pub duration: Option<Duration>,
    /// Length of a tick, the unit the dynamic search judges (default 5s).
    #[arg(long, value_parser = payload::duration)]
    pub tick: Option<Duration>,
    /// Passing ticks in a row for a rate to be stable (default 24: 2 minutes of 5s ticks).
    #[arg(long)]
    pub stable_ticks: Option<u32>,
    /// Short search: 1s ticks, 3 stable ticks (unless given).
    #[arg(long)]
    pub quick: bool,
    /// First rate the dynamic search tries.
    #[arg(long, default_value_t = 100.0)]
    pub start_rate: f64,
    /// Start the dynamic search without the closed-loop probe of the
    /// capacity (doubling from --start-rate instead).
    #[arg(long)]
    pub no_probe: bool,
    /// Highest rate the dynamic search tries.
    #[arg(long)]
    pub max_rate: Option<f64>,
    /// A tick fails when its p99 latency is above this (default: 10 x the
    /// lowest p99 of a passing tick, at least 20ms).
    #[arg(long, value_parser = payload::duration)]
    pub p99_limit: Option<Duration>,
    /// Request timeout.
    #[arg(long, default_value = "5s", value_parser = payload::duration)]
    pub timeout: Duration,
    /// A substring every answer must contain (else it counts as an error).
    #[arg(long)]
    pub check: Option<String>,
    /// Write the report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the report as a self-contained HTML page with plots.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(clap::Args)]
pub struct RequestArgs {
    /// The core's socket (a path, or tcp://host:port).
    #[arg(long, conflicts_with = "config", required_unless_present = "config")]
    pub socket: Option<String>,
    /// Start a core with this config for the run, and stop it after.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The service name to send to.
    #[arg(long)]
    pub name: String,
    /// Connections (unmanaged instances), each sending its share.
    #[arg(long, default_value_t = 3)]
    pub connections: usize,
    /// The request body as KEY=VALUE pairs (repeat for more), key/value encoded.
    #[arg(long, conflicts_with = "request_raw")]
    pub request: Vec<String>,
    /// The request body as raw text.
    #[arg(long)]
    pub request_raw: Option<String>,
    /// request_info as KEY=VALUE pairs (repeat for more).
    #[arg(long)]
    pub info: Vec<String>,
    /// Most requests outstanding per connection (default 1024; with --max,
    /// the number each connection keeps in flight, default 1).
    #[arg(long)]
    pub inflight_max: Option<usize>,
    /// The prefix of the sending instances.
    #[arg(long, default_value = "/bench/")]
    pub prefix: String,
    /// How long to wait for the service to answer before the run starts.
    #[arg(long, default_value = "30s", value_parser = payload::duration)]
    pub wait: Duration,
    #[command(flatten)]
    pub rate: RateArgs,
}

#[derive(clap::Args)]
pub struct HttpArgs {
    /// The URL to GET (http:// only).
    #[arg(long)]
    pub url: String,
    /// Keep-alive connections, opened before the run; one request at a time on each.
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// Threads sending (default: one per CPU).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub rate: RateArgs,
}

/// Reads the Unix socket path a config file gives its core.
pub type SocketOfConfig = fn(&std::path::Path) -> anyhow::Result<String>;

/// `cumulo bench`. `socket_of_config` reads a config file's socket path
/// (the config belongs to the binary, not to the load generator): where
/// `--config` starts a core of its own, its clients connect there.
pub fn main(args: BenchArgs, socket_of_config: SocketOfConfig) -> ExitCode {
    let result = match args.mode {
        BenchMode::Request(a) => request(a, socket_of_config),
        BenchMode::Http(a) => http(a),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cumulo bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

impl RateArgs {
    fn plan(&self) -> anyhow::Result<(Plan, &'static str)> {
        let tick = self.tick.unwrap_or(if self.quick { Duration::from_secs(1) } else { Duration::from_secs(5) });
        if tick < Duration::from_millis(100) {
            bail!("--tick must be at least 100ms");
        }
        let (mode, name) = match (self.rate, self.max) {
            (Some(r), _) if !(r.is_finite() && r > 0.0) => bail!("--rate must be a positive number of requests/second"),
            (Some(r), _) => (RateMode::Fixed(r), "fixed"),
            (None, true) => (RateMode::Max, "max"),
            (None, false) => {
                if !(self.start_rate.is_finite() && self.start_rate >= 1.0) {
                    bail!("--start-rate must be at least 1");
                }
                let stable_ticks = self.stable_ticks.unwrap_or(if self.quick { 3 } else { 24 });
                if stable_ticks == 0 {
                    bail!("--stable-ticks must be at least 1");
                }
                let s = DynamicSettings {
                    start_rate: self.start_rate,
                    stable_ticks,
                    latency_limit: self.p99_limit,
                    max_rate: self.max_rate,
                    probe: !self.no_probe,
                    ..Default::default()
                };
                (RateMode::Dynamic(s), "dynamic")
            }
        };
        let duration = self.duration.unwrap_or(match mode {
            RateMode::Dynamic(_) => Duration::from_secs(600),
            _ => Duration::from_secs(30),
        });
        if duration.is_zero() {
            bail!("--duration must be more than 0");
        }
        if let RateMode::Dynamic(s) = &mode {
            self.check_search_fits(s, tick, duration)?;
        }
        let plan = Plan {
            mode,
            tick,
            timeout: self.timeout,
            duration: Some(duration),
            stop_when_stable: true,
            report_every: None,
        };
        Ok((plan, name))
    }
}

/// The least time a dynamic search can end in: the probe, then
/// `stable_ticks` passing ticks at one rate (climbing to it takes more).
fn least_search_time(s: &DynamicSettings, tick: Duration) -> Duration {
    let probe = if s.probe { tick.min(PROBE_MAX) } else { Duration::ZERO };
    probe + tick * s.stable_ticks
}

impl RateArgs {
    /// Refuses, before anything starts, a search that cannot end within
    /// `--duration`: it would run to the end and report no stable rate.
    /// The ticks are not shortened to fit: a shorter tick judges a rate on
    /// fewer requests, and the figure would be noisier than asked for.
    fn check_search_fits(&self, s: &DynamicSettings, tick: Duration, duration: Duration) -> anyhow::Result<()> {
        let least = least_search_time(s, tick);
        if duration >= least {
            return Ok(());
        }
        let given = match self.duration {
            Some(_) => format!("--duration {}", human_s(duration)),
            None => format!("the default --duration {}", human_s(duration)),
        };
        let quick = DynamicSettings { stable_ticks: 3, ..s.clone() };
        let quick_least = least_search_time(&quick, Duration::from_secs(1));
        bail!(
            "{given} is too short for the dynamic search: it needs at least {} (a probe, then {} passing ticks of {} \
             in a row at one rate, and more to climb to that rate).\n  give --duration {} or more, --quick (1s ticks, \
             3 stable: at least {}), or --rate R to hold a fixed rate for {}",
            human_s(least),
            s.stable_ticks,
            human_s(tick),
            human_s(least * 2),
            human_s(quick_least),
            human_s(duration)
        )
    }
}

/// "122s", "1.5s", as `--duration` takes it.
fn human_s(d: Duration) -> String {
    format!("{}s", (d.as_secs_f64() * 10.0).round() / 10.0)
}

/// Prints the search's steps above the progress line.
struct Say(Rc<RefCell<Progress>>, bool);

impl Observer for Say {
    fn tick(&mut self, t: &TickRecord) {
        if !self.1 {
            return;
        }
        let verdict = match &t.failed {
            Some(why) => format!("failed: {why}"),
            None => "passed".to_string(),
        };
        let target = t.target_rate.map_or(String::new(), |r| format!("target {r:.1}, "));
        self.0.borrow_mut().say(&format!(
            "tick {:>3}: {target}answered {:.1}/s, p99 {}: {verdict}",
            t.index,
            t.rate,
            human_us(t.p99_us)
        ));
    }
    fn note(&mut self, msg: &str) {
        self.0.borrow_mut().say(msg);
    }
}

/// Runs the plan with lanes already started; collects the report.
async fn run_plan(
    plan: &Plan,
    name: &'static str,
    pace: &tokio::sync::watch::Sender<schedule::Schedule>,
    rec: &SharedRecorder,
    quiet: bool,
) -> (super::driver::RunEnd, Vec<super::progress::Sample>) {
    let progress = Rc::new(RefCell::new(Progress::new(quiet)));
    let mut say = Say(progress.clone(), name == "dynamic" && !quiet);
    let started = Instant::now();
    let samples = sample_loop(rec.clone(), pace.subscribe(), started, progress.clone());
    let (end, samples) = tokio::join!(drive(plan, pace, rec, &mut say), samples);
    // Answers still on their way count in the totals; those that never
    // come are timeouts.
    let until = Instant::now() + plan.timeout + Duration::from_secs(1);
    while rec.lock().outstanding > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    rec.lock().give_up_outstanding();
    (end, samples)
}

fn finish(report: BenchReport, rate: &RateArgs) -> anyhow::Result<bool> {
    print!("{}", report.to_text());
    if let Some(p) = &rate.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(p, text + "\n").with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &rate.html {
        std::fs::write(p, html::render(&report)).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(report.success)
}

fn totals(rec: &SharedRecorder, seconds: f64) -> Totals {
    let g = rec.lock();
    Totals {
        due: g.total_sent + g.total_not_sent,
        sent: g.total_sent,
        not_sent: g.total_not_sent,
        ok: g.total_ok,
        errors: g.total_errors,
        errors_by_kind: g.errors_by_kind.clone(),
        timeouts: g.total_timeouts,
        timed_out: g.total_timed_out,
        unanswered: g.total_unanswered,
        seconds,
        first_error: g.first_error.clone(),
    }
}

fn request(a: RequestArgs, socket_of_config: SocketOfConfig) -> anyhow::Result<bool> {
    let (plan, rate_name) = a.rate.plan()?;
    if a.connections == 0 || a.connections > 4096 {
        bail!("--connections must be 1 .. 4096");
    }
    let body = match &a.request_raw {
        Some(raw) => raw.as_bytes().to_vec(),
        None => payload::pairs(&a.request).map_err(|e| anyhow::anyhow!("--request {e}"))?,
    };
    let info = payload::pairs(&a.info).map_err(|e| anyhow::anyhow!("--info {e}"))?;
    let timeout_ms = a.rate.timeout.as_millis().clamp(1, u32::MAX as u128) as u32;
    let spec = Rc::new(RequestSpec {
        name: a.name.clone(),
        request_info: info,
        request: body,
        timeout_ms,
        check: a.rate.check.as_ref().map(|c| c.as_bytes().to_vec()),
    });
    let inflight_max = a.inflight_max.unwrap_or(if matches!(plan.mode, RateMode::Max) { 1 } else { 1024 });

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let mut core = None;
        let socket = match (&a.socket, &a.config) {
            (Some(s), _) => s.clone(),
            (None, Some(cfg)) => {
                let c = super::own_core::OwnCore::start(cfg, socket_of_config(cfg)?).await?;
                let s = c.socket.clone();
                core = Some(c);
                s
            }
            (None, None) => bail!("give --socket or --config"),
        };
        let mut conns = Vec::with_capacity(a.connections);
        for _ in 0..a.connections {
            conns.push(connect_retrying(&socket, &a.prefix, core.is_some()).await?);
        }
        conns[0].probe(&spec, a.wait).await?;
        let (pace, pace_rx) = schedule::channel();
        let rec = SharedRecorder::default();
        let lanes = conns.len();
        for (i, c) in conns.into_iter().enumerate() {
            tokio::task::spawn_local(service_client::run_lane(
                c,
                spec.clone(),
                i,
                lanes,
                pace_rx.clone(),
                rec.clone(),
                inflight_max,
            ));
        }
        let (end, samples) = run_plan(&plan, rate_name, &pace, &rec, a.rate.quiet).await;
        let t = totals(&rec, end.seconds);
        if let Some(c) = core {
            c.stop().await;
        }
        let header = Header { kind: "request", target: a.name.clone(), rate_mode: rate_name, connections: lanes };
        finish(BenchReport::new(header, end, samples, t), &a.rate)
    })
}

/// A core just started may not listen yet.
async fn connect_retrying(socket: &str, prefix: &str, retry: bool) -> anyhow::Result<service_client::Connection> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match service_client::connect(socket, prefix).await {
            Ok(c) => return Ok(c),
            Err(e) if retry && Instant::now() < until => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn http(a: HttpArgs) -> anyhow::Result<bool> {
    let (plan, rate_name) = a.rate.plan()?;
    if a.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let needed = a.connections as u64 + 64;
    let limit = http_client::raise_fd_limit(needed);
    if needed > limit {
        bail!("{} connections need about {needed} open files; the limit is {limit} (raise it with ulimit -n, or use fewer connections)", a.connections);
    }
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, a.connections);
    let check = a.rate.check.as_ref().map(|c| c.as_bytes().to_vec());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let target = Arc::new(http_client::HttpTarget::new(&a.url, a.rate.timeout, check).await?);
        let (pace, pace_rx) = schedule::channel();
        let rec = SharedRecorder::default();
        let count = Arc::new(http_client::ConnectCount::default());
        let mut handles = Vec::new();
        for t in 0..threads {
            let lanes_here: Vec<usize> = (t..a.connections).step_by(threads).collect();
            let (target, rx, rec, count) = (target.clone(), pace_rx.clone(), rec.clone(), count.clone());
            let lanes = a.connections;
            handles.push(std::thread::Builder::new().name(format!("bench-http-{t}")).spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
                rt.block_on(http_client::run_lanes(target, lanes_here, lanes, rx, rec, count));
            })?);
        }
        // Every connection opened (or failed) before the clock starts.
        let opening = Instant::now();
        use std::sync::atomic::Ordering::Relaxed;
        while count.tried.load(Relaxed) < a.connections {
            if opening.elapsed() > Duration::from_secs(120) {
                bail!("opened only {} of {} connections in 120 s", count.tried.load(Relaxed), a.connections);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let failed = count.failed.load(Relaxed);
        if failed == a.connections {
            schedule::set(&pace, schedule::Pace::Stopped);
            bail!("cannot connect to {} ({})", target.url, target.addr);
        }
        if !a.rate.quiet {
            eprintln!(
                "{} connections open to {} in {:.1} s{}",
                a.connections - failed,
                target.addr,
                opening.elapsed().as_secs_f64(),
                if failed > 0 { format!(" ({failed} failed)") } else { String::new() }
            );
        }
        let (end, samples) = run_plan(&plan, rate_name, &pace, &rec, a.rate.quiet).await;
        let t = totals(&rec, end.seconds);
        for h in handles {
            let _ = h.join();
        }
        let header = Header { kind: "http", target: a.url.clone(), rate_mode: rate_name, connections: a.connections };
        finish(BenchReport::new(header, end, samples, t), &a.rate)
    })
}
