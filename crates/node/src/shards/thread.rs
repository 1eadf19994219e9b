//! The threads of shards 1.. (shard 0 is the daemon's own thread, which runs
//! the supervisor, the admin API and the cluster). Each runs a core of its
//! own with its timer loop and the HTTP gateways shard 0's supervisor orders
//! (`Gateways`), bound to the same ports (SO_REUSEPORT: the kernel spreads
//! the connections), so that HTTP parsing runs on every thread. Service
//! processes connect to shard 0, which hands most of their connections to
//! the other shards after their HELLO (`handoff`).

use super::{Ends, GatewayOrder};
use crate::api::InternalApi;
use cumulo_config::Config;
use cumulo_router::InstanceId;
use cumulo_router::ServiceMetrics;
use cumulo_router::Shared;
use cumulo_router::Stats;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::task::LocalSet;
use tokio_util::sync::CancellationToken;

/// Starts the thread of shard `ends.index`; it returns once the core stops.
pub fn spawn(
    cfg: Config,
    ends: Ends,
    tracer: Option<cumulo_service::trace::Recorder>,
) -> std::io::Result<std::thread::JoinHandle<Stats>> {
    std::thread::Builder::new().name(format!("cumulo-shard-{}", ends.index)).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("shard {}: cannot start its runtime: {e}", ends.index);
                return Stats::default();
            }
        };
        LocalSet::new().block_on(&rt, serve(cfg, ends, tracer))
    })
}

async fn serve(cfg: Config, ends: Ends, tracer: Option<cumulo_service::trace::Recorder>) -> Stats {
    let index = ends.index;
    let core = crate::runtime::new_core(&cfg, tracer.as_ref());
    drop(tracer); // the core holds its own: the exporter ends when every core has gone
    let links = super::attach(&core, ends);
    tokio::task::spawn_local(crate::runtime::timer_loop(core.clone()));
    tokio::task::spawn_local(crate::runtime::health_loop(core.clone()));
    // The service connections handed to this shard are pinged as shard 0's
    // are; shard 0 kills a hung one's process when told it is gone.
    tokio::task::spawn_local(crate::runtime::keepalive_loop(core.clone(), |_, _| {}));
    tracing::debug!("shard {index} running");
    links.stopped().await;
    // As shard 0 does: queued requests fail with SHUTTING_DOWN, the gateways
    // stop accepting and finish the requests they hold (answered by shard 0
    // while it drains, or failed at the end of the terminate timeout).
    let terminate = cfg.services.iter().map(|s| s.timeout_terminate).max().unwrap_or(0);
    core.borrow_mut().begin_shutdown(terminate);
    links.gateways.stop_all(&core);
    let end = Instant::now() + Duration::from_millis(terminate as u64);
    while core.borrow().in_flight() != 0 && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    core.borrow_mut().finish_shutdown();
    // The gateways' last answers leave, and the last bytes of the service
    // connections handed to this shard.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let end = Instant::now() + Duration::from_secs(1);
    while core.borrow().open_connections() > 0 && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Its counters, each request counted once (as the admin API counts):
    // shard 0 adds every shard's to its own for the line it logs.
    let stats = super::report::snapshot(&core.borrow(), index, &[]).stats;
    tracing::debug!("shard {index} stopped; {stats}");
    stats
}

/// The gateway slots this shard runs, by (service id, slot index).
#[derive(Clone, Default)]
pub struct Gateways(Rc<RefCell<HashMap<(u32, u32), Running>>>, Rc<RefCell<HashMap<u32, Rc<ServiceMetrics>>>>);

/// One gateway slot's instances on this shard.
struct Running {
    ids: Vec<InstanceId>,
    cancel: CancellationToken,
    timeout_terminate: u32,
}

impl Gateways {
    /// Carries out shard 0's order: the slot's instances here stop (as
    /// shard 0's did), then start again if the order says what to run.
    pub fn apply(&self, core: &Shared, order: GatewayOrder) {
        self.stop(core, order.slot, order.timeout_terminate);
        let Some(spec) = order.start else {
            // The service's counters go with its last slot.
            let service = order.slot.0;
            if !self.0.borrow().keys().any(|(s, _)| *s == service) {
                self.1.borrow_mut().remove(&service);
            }
            return;
        };
        let (service_id, process) = order.slot;
        let options = Rc::new(spec.options);
        // One set of counters per service on this shard, kept across
        // restarts as shard 0's supervisor keeps its own (the admin API
        // adds them up, shards/report.rs).
        let metrics = self.1.borrow_mut().entry(service_id).or_default().clone();
        let cancel = CancellationToken::new();
        let mut ids = Vec::new();
        for _ in 0..spec.count_thread {
            let started = crate::catalogue::create("http", &spec.settings).and_then(|service| {
                let api = InternalApi::connect(
                    core,
                    &spec.prefix,
                    options.clone(),
                    metrics.clone(),
                    service_id,
                    process,
                    spec.count_process,
                    spec.count_thread,
                )
                .map_err(|e| e.why)?;
                Ok((service, api))
            });
            match started {
                Ok((service, api)) => {
                    ids.push(api.instance_id());
                    let cancel = cancel.clone();
                    tokio::task::spawn_local(async move {
                        tokio::select! {
                            _ = service.run(api) => {}
                            _ = cancel.cancelled() => {}
                        }
                    });
                }
                Err(why) => tracing::error!(service = %spec.prefix, "shard: cannot start the HTTP gateway: {why}"),
            }
        }
        let running = Running { ids, cancel, timeout_terminate: order.timeout_terminate };
        self.0.borrow_mut().insert(order.slot, running);
    }

    fn stop(&self, core: &Shared, slot: (u32, u32), timeout_terminate: u32) {
        let Some(r) = self.0.borrow_mut().remove(&slot) else { return };
        let why = format!("HTTP gateway (service {}) stopped before handling the request", slot.0);
        core.borrow_mut().retire_instances(&r.ids, timeout_terminate.min(r.timeout_terminate), &why);
        // Its listener closes now; open connections finish their current
        // request (the gateway's own shutdown).
        r.cancel.cancel();
    }

    /// The counters of the gateways this shard runs, per service id.
    pub fn service_metrics(&self) -> Vec<(u32, Rc<ServiceMetrics>)> {
        self.1.borrow().iter().map(|(id, m)| (*id, m.clone())).collect()
    }

    /// Stops every slot (the core stops).
    fn stop_all(&self, core: &Shared) {
        let slots: Vec<_> = self.0.borrow().iter().map(|(k, r)| (*k, r.timeout_terminate)).collect();
        for (slot, terminate) in slots {
            self.stop(core, slot, terminate);
        }
    }
}
