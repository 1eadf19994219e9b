//! The client of cumulo's queue: `--senders` connections to the core (one
//! thread and one unmanaged instance each, through the Rust SDK), each
//! keeping `--in-flight` requests sent with `send_async` to `--name` (the
//! queue's prefix followed by the destination). An answer with status OK is
//! an acknowledgement: in the queue's `accepted` mode, the request is on
//! disk; in `destination` mode, the destination answered it. Answers are
//! counted per status; the latency is from the send to an OK answer.

use crate::{latency_fields, new_histogram, record, Load, Window};
use anyhow::{bail, Context};
use cumulo::{Api, Error, Options, SendOptions, Status, TransId};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ClientArgs {
    #[command(flatten)]
    pub load: Load,
    /// The core's socket (a path or tcp://host:port).
    #[arg(long)]
    pub socket: String,
    /// Where the requests go: the queue's prefix, then the destination.
    #[arg(long, default_value = "/queue/bench/sink")]
    pub name: String,
    /// Names that must answer OK before the run (sent with
    /// wait_for_service, so a service still starting is waited for); the
    /// `--name` itself is always probed this way, last.
    #[arg(long)]
    pub wait_for: Vec<String>,
    /// How long the probes before the run may wait, in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub ready_wait_ms: u32,
    /// Each request's timeout, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u32,
}

/// What one connection saw in the measured window.
struct Outcome {
    latency: Histogram<u64>,
    statuses: BTreeMap<String, u64>,
    /// Requests still unanswered when the connection gave up waiting.
    unanswered: usize,
}

pub fn run(args: ClientArgs) -> anyhow::Result<()> {
    args.load.check()?;
    probe(&args)?;
    let window = args.load.window();
    let threads: Vec<_> = (0..args.load.senders)
        .map(|index| {
            let (socket, name, load) = (args.socket.clone(), args.name.clone(), args.load.clone());
            let timeout = args.timeout_ms;
            std::thread::Builder::new()
                .name(format!("sender-{index}"))
                .spawn(move || send_loop(&socket, index, &name, &load, timeout, window))
        })
        .collect::<Result<_, _>>()?;
    let mut latency = new_histogram();
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    let mut unanswered = 0;
    for thread in threads {
        let one = thread.join().map_err(|_| anyhow::anyhow!("a sender thread panicked"))??;
        latency.add(&one.latency)?;
        for (status, n) in one.statuses {
            *statuses.entry(status).or_default() += n;
        }
        unanswered += one.unanswered;
    }
    let seconds = window.seconds();
    let acked = statuses.get("OK").copied().unwrap_or(0);
    let errors: u64 = statuses.iter().filter(|(s, _)| *s != "OK").map(|(_, n)| n).sum();
    let by_status = if statuses.is_empty() {
        "none".to_string()
    } else {
        statuses.iter().map(|(s, n)| format!("{s}:{n}")).collect::<Vec<_>>().join(",")
    };
    println!(
        "cumulo acked={acked} errors={errors} seconds={seconds:.3} acked_per_s={:.1} {} statuses={by_status} \
         unanswered={unanswered} senders={} in_flight={} body={} name={}",
        acked as f64 / seconds,
        latency_fields(&latency),
        args.load.senders,
        args.load.in_flight,
        args.load.body,
        args.name,
    );
    anyhow::ensure!(acked > 0, "no request was acknowledged in the measured window");
    Ok(())
}

/// Before the run: every `--wait-for` name, then `--name`, must answer OK
/// (the destination subscribed, the queue up).
fn probe(args: &ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(Options::unmanaged(args.socket.clone(), "/queue-bench/probe/"))
        .with_context(|| format!("cannot connect to the core at {}", args.socket))?;
    let o = SendOptions { timeout: args.ready_wait_ms, wait_for_service: true, ..Default::default() };
    let body = args.load.body_bytes();
    for name in args.wait_for.iter().chain(std::iter::once(&args.name)) {
        if let Err(e) = api.send_sync(name, b"", &body, o) {
            bail!("{name} did not answer OK before the run: {e}");
        }
    }
    Ok(api.close()?)
}

/// One connection: `in_flight` requests outstanding until the window ends,
/// then what it has in flight is waited for (for up to the request timeout
/// and a little more: the core answers every request, TIMEOUT at the latest).
fn send_loop(
    socket: &str,
    index: usize,
    name: &str,
    load: &Load,
    timeout_ms: u32,
    window: Window,
) -> anyhow::Result<Outcome> {
    let mut api = Api::connect(Options::unmanaged(socket, format!("/queue-bench/sender{index}/")))
        .with_context(|| format!("cannot connect to the core at {socket}"))?;
    let body = load.body_bytes();
    let o = SendOptions { timeout: timeout_ms, ..Default::default() };
    let mut sent: HashMap<TransId, Instant> = HashMap::with_capacity(load.in_flight * 2);
    let mut outcome = Outcome { latency: new_histogram(), statuses: BTreeMap::new(), unanswered: 0 };
    let give_up = window.until + Duration::from_millis(timeout_ms as u64) + Duration::from_secs(5);
    loop {
        let now = Instant::now();
        if now < window.until {
            while sent.len() < load.in_flight {
                // Written at the next flush: the recv_async below.
                let tid = api.send_async(name, b"", &body, o);
                sent.insert(tid, now);
            }
        } else if sent.is_empty() || now >= give_up {
            break;
        }
        let wait = if now < window.until { window.until - now } else { give_up - now };
        let Some((tid, answer)) = api.recv_async(None, wait.max(Duration::from_millis(1)))? else { continue };
        let Some(since) = sent.remove(&tid) else { continue };
        let now = Instant::now();
        let status = match answer {
            Ok(_) => Status::Ok,
            Err(Error::Status { status, .. }) => status,
            Err(e) => return Err(e.into()),
        };
        if window.contains(now) {
            if status == Status::Ok {
                record(&mut outcome.latency, now - since);
            }
            *outcome.statuses.entry(status.to_string()).or_default() += 1;
        }
    }
    outcome.unanswered = sent.len();
    Ok(outcome)
}
