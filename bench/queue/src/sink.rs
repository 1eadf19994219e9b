//! The destination the queue delivers to: a service the core runs
//! (`Options::from_env`), one instance per `CUMULO_THREAD_COUNT` thread,
//! each subscribing `*` under its prefix and answering every request OK
//! with an empty body. It counts what it received and says so when it
//! stops, on TERMINATE or on SIGTERM: a line `sink received=N bytes=B` on
//! stdout and, with `--out FILE`, the same line in that file (the core logs
//! a service's stdout at level info only).

use anyhow::Context;
use cumulo::{Answer, Api, Options};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

#[derive(clap::Args)]
pub struct SinkArgs {
    /// Requests the core may deliver to each instance at once.
    #[arg(long, default_value_t = 16)]
    pub window: u32,
    /// A file to write the final count to (replaced when the sink stops).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

struct Counts {
    received: AtomicU64,
    bytes: AtomicU64,
    reported: Once,
    out: Option<PathBuf>,
}

impl Counts {
    /// Says the counts, once, whichever way the sink stops.
    fn report(&self) {
        self.reported.call_once(|| {
            let line = format!(
                "sink received={} bytes={}",
                self.received.load(Ordering::Relaxed),
                self.bytes.load(Ordering::Relaxed)
            );
            println!("{line}");
            if let Some(out) = &self.out {
                // Written beside, then renamed: a reader sees the whole line or none.
                let tmp = out.with_extension("tmp");
                if let Err(e) = std::fs::write(&tmp, format!("{line}\n")).and_then(|()| std::fs::rename(&tmp, out)) {
                    eprintln!("queue-bench sink: cannot write {}: {e}", out.display());
                }
            }
        });
    }
}

pub fn run(args: SinkArgs) -> anyhow::Result<()> {
    let counts = Arc::new(Counts {
        received: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        reported: Once::new(),
        out: args.out,
    });
    {
        // SIGTERM (the core's, after TERMINATE went unheeded, or anyone's):
        // report, then exit.
        let counts = counts.clone();
        let signals = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let mut term =
            signals.block_on(async { tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) })?;
        std::thread::Builder::new().name("sigterm".into()).spawn(move || {
            signals.block_on(term.recv());
            counts.report();
            std::process::exit(0);
        })?;
    }
    let threads: u32 = std::env::var("CUMULO_THREAD_COUNT").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let instances: Vec<_> = (0..threads)
        .map(|t| {
            let counts = counts.clone();
            let window = args.window;
            std::thread::Builder::new().name(format!("instance-{t}")).spawn(move || -> anyhow::Result<()> {
                let mut api =
                    Api::connect(Options { window, ..Options::from_env(t)? }).context("cannot connect to the core")?;
                api.subscribe("*", move |_api, req| {
                    counts.received.fetch_add(1, Ordering::Relaxed);
                    counts.bytes.fetch_add(req.request.len() as u64, Ordering::Relaxed);
                    Ok(Answer::body(Vec::new()))
                })?;
                while api.poll(None)? {}
                Ok(())
            })
        })
        .collect::<Result<_, _>>()?;
    let mut first = Ok(());
    for instance in instances {
        let r = instance.join().unwrap_or_else(|_| Err(anyhow::anyhow!("an instance thread panicked")));
        if first.is_ok() {
            first = r;
        }
    }
    counts.report();
    first
}
