//! The threads of shards 1.. (shard 0 is the daemon's own thread, which runs
//! the supervisor, the admin API and the cluster). Each runs a core of its
//! own with its timer loop and the HTTP gateways of the config file, bound
//! to the same ports (SO_REUSEPORT: the kernel spreads the connections), so
//! that HTTP parsing runs on every thread. Service processes connect to
//! shard 0; their patterns reach the other shards by replication.

use super::Ends;
use crate::config::Config;
use crate::internal::InternalApi;
use crate::state::{Core, Shared};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::{JoinHandle, LocalSet};

/// Starts the thread of shard `ends.index`; it returns once the core stops.
pub fn spawn(cfg: Config, ends: Ends) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name(format!("cumulo-shard-{}", ends.index)).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return tracing::error!("shard {}: cannot start its runtime: {e}", ends.index),
        };
        LocalSet::new().block_on(&rt, serve(cfg, ends));
    })
}

async fn serve(cfg: Config, ends: Ends) {
    let index = ends.index;
    let core: Shared = Rc::new(RefCell::new(Core::new(crate::daemon::limits(&cfg), cfg.core.unmanaged.clone())));
    let links = super::attach(&core, ends);
    tokio::task::spawn_local(crate::daemon::timer_loop(core.clone()));
    tokio::task::spawn_local(give_back_memory(core.clone()));
    let gateways = start_gateways(&core, &cfg);
    tracing::debug!("shard {index} running ({} gateway instances)", gateways.len());
    links.stopped().await;
    // As shard 0 does: queued requests fail with SHUTTING_DOWN, the gateways
    // stop accepting and finish the requests they hold (answered by shard 0
    // while it drains, or failed at the end of the terminate timeout).
    let terminate = cfg.services.iter().map(|s| s.timeout_terminate).max().unwrap_or(0);
    core.borrow_mut().begin_shutdown(terminate);
    for g in &gateways {
        g.abort();
    }
    let end = Instant::now() + Duration::from_millis(terminate as u64);
    while !core.borrow().inflight.is_empty() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    core.borrow_mut().finish_shutdown();
    // The gateways' last answers leave.
    tokio::time::sleep(Duration::from_millis(50)).await;
    tracing::debug!("shard {index} stopped; {}", core.borrow().stats);
}

/// Returns the memory of subscriptions that went to the system, as shard 0's
/// keep-alive round does (a trim deferred by the registry's rate limit
/// happens on a later round).
async fn give_back_memory(core: Shared) {
    let every = core.borrow().limits.keepalive;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut c = core.borrow_mut();
        let now = c.refresh_now();
        c.registry.give_back_memory(now);
    }
}

/// One instance of every HTTP gateway of the config file per process and
/// thread it is configured with, as the supervisor starts on shard 0.
fn start_gateways(core: &Shared, cfg: &Config) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for (i, svc) in cfg.services.iter().enumerate() {
        if svc.internal.as_deref() != Some("http") {
            continue;
        }
        let options = Rc::new(svc.options());
        let metrics = Rc::new(crate::metrics::ServiceMetrics::default());
        for p in 0..svc.count_process {
            for _ in 0..svc.count_thread {
                let started = crate::internal::create("http", &svc.settings).and_then(|service| {
                    let api = InternalApi::connect(
                        core,
                        &svc.prefix,
                        options.clone(),
                        metrics.clone(),
                        i as u32 + 1,
                        p,
                        svc.count_process,
                        svc.count_thread,
                    )
                    .map_err(|(_, m)| m)?;
                    Ok(tokio::task::spawn_local(service.run(api)))
                });
                match started {
                    Ok(t) => tasks.push(t),
                    Err(why) => tracing::error!(service = %svc.prefix, "shard: cannot start the HTTP gateway: {why}"),
                }
            }
        }
    }
    tasks
}
