//! What every shard runs beside its connections: its core made from the
//! config, the timer that answers expired requests, the health probes.

use cumulo_config::Config;
use cumulo_router::{Core, Limits, Shared};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The routing limits of a config, the same for every shard.
pub fn limits(cfg: &Config) -> Limits {
    Limits {
        node_id: cfg.core.node_id,
        max_frame: cfg.core.max_frame,
        max_outbox: cfg.core.max_outbox as usize,
        max_parked: cfg.core.max_parked as usize,
        max_queued_bytes: cfg.core.max_queued_bytes as usize,
        max_sender_queued_bytes: cfg.core.max_sender_queued_bytes as usize,
        names: cfg.name_limits(),
        max_subscriptions: cfg.core.max_subscriptions as usize,
        hello_timeout: Duration::from_millis(cfg.core.hello_timeout as u64),
        keepalive: Duration::from_millis(cfg.core.keepalive as u64),
        max_connections: cfg.core.max_connections,
        allow_unmanaged: cfg.core.allow_unmanaged,
        tcp_anonymous: cfg.core.tcp_anonymous,
        unix_anonymous: cfg.core.unix_anonymous,
        spread_instances: cfg.core.spread_instances,
    }
}

/// One shard's core: its limits, the options of unmanaged instances and
/// the `[[client]]`s it admits by token; `tracer`: where it records spans
/// (`[tracing]` on; one recorder for every shard).
pub fn new_core(cfg: &Config, tracer: Option<&cumulo_service::trace::Recorder>) -> Shared {
    let mut core = Core::new(limits(cfg), cfg.core.unmanaged.clone());
    core.set_clients(Rc::new(cumulo_router::Clients::new(&cfg.clients, &cfg.core.unmanaged)));
    core.set_policies(&cfg.policies);
    if let Some(recorder) = tracer {
        let start_traces = cfg.tracing.as_ref().is_some_and(|t| t.start_traces);
        core.set_tracing(recorder.clone(), start_traces);
    }
    Rc::new(RefCell::new(core))
}

/// Fires request timeouts: each expired request gets its TIMEOUT response.
/// Sleeps until the earliest deadline held (`timeouts.rs`), or until a
/// request with an earlier one is armed.
pub async fn timer_loop(core: Shared) {
    /// Expired requests answered per turn of the event loop, so that a mass
    /// expiry does not hold the thread.
    const BATCH: usize = 1024;
    loop {
        let (more, next, wake) = {
            let mut c = core.borrow_mut();
            let more = c.expire_due(BATCH);
            (more, c.next_deadline(), c.timers().wake.clone())
        };
        if more {
            tokio::task::yield_now().await;
            continue;
        }
        match next {
            Some(at) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(at.into()) => {}
                    _ = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// Sends the health probes that are due (`[service.health]`), checked
/// every 100 ms: a probe's interval is at least that.
pub async fn health_loop(core: Shared) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        core.borrow_mut().health_tick();
    }
}

/// The keep-alive round (`core.keepalive`): pings, hung instances closed,
/// and the memory of closed subscriptions given back (a trim deferred by
/// the registry's rate limit happens on a later round). `on_hung` gets the
/// pids of the processes whose instances were closed as hung this round.
pub async fn keepalive_loop(core: Shared, mut on_hung: impl FnMut(&Shared, Vec<u32>)) {
    let every = core.borrow().limits().keepalive;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut nonce = 0u64;
    loop {
        tick.tick().await;
        nonce += 1;
        let hung = core.borrow_mut().keepalive_tick(std::time::Instant::now(), nonce);
        on_hung(&core, hung);
    }
}
