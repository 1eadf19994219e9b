//! The services and process slots the supervisor runs, as the admin API
//! sees them: their state, their processes, their instances.

use cumulo_config::{ServiceConfig, ServiceOptions};
use cumulo_router::InstanceId;
use cumulo_router::ServiceId;
use cumulo_router::ServiceMetrics;
use cumulo_router::{ServiceLive, SlotPhase};
use std::cell::{Cell, Ref, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

/// What one process slot is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    /// Started, not all its threads connected yet.
    Starting,
    Running,
    /// Exited; waiting `restart_delay` before the next start.
    Restarting,
    /// Told to TERMINATE; waiting for it to exit.
    Stopping,
    /// Gave up after `max_r` restarts within `max_t`; stays down until an
    /// admin restart.
    Failed,
    Stopped,
}

impl ProcState {
    pub fn name(self) -> &'static str {
        match self {
            ProcState::Starting => "starting",
            ProcState::Running => "running",
            ProcState::Restarting => "restarting",
            ProcState::Stopping => "stopping",
            ProcState::Failed => "failed",
            ProcState::Stopped => "stopped",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SlotState {
    pub state: ProcState,
    /// Processes started in this slot so far.
    pub generation: u64,
}

/// One process index of a service.
pub struct Slot {
    pub index: u32,
    pub(super) stop: CancellationToken,
    pub(super) restart: Notify,
    pub(super) state: watch::Sender<SlotState>,
    pub pid: Cell<Option<u32>>,
    /// The running process's token (its `ProcessSlot` in the core).
    pub(super) token: RefCell<Option<Rc<str>>>,
    /// Instances of an internal service slot.
    pub(super) internal_ids: RefCell<Vec<InstanceId>>,
    /// Restarts after the process exited on its own.
    pub restarts: Cell<u64>,
    /// Being stopped because count_process went down.
    pub(super) retired: Cell<bool>,
    /// Why it is being stopped, for the log.
    pub(super) stop_reason: Cell<StopReason>,
    /// Its service's entry in the router's table of services.
    pub(super) live: Arc<ServiceLive>,
}

impl ProcState {
    /// The router's view: whether an instance is coming, serving, given up
    /// or not coming (what a request for an unsubscribed name gets).
    pub fn phase(self) -> SlotPhase {
        match self {
            ProcState::Starting | ProcState::Restarting | ProcState::Stopping => SlotPhase::Coming,
            ProcState::Running => SlotPhase::Running,
            ProcState::Failed => SlotPhase::GivenUp,
            ProcState::Stopped => SlotPhase::Stopped,
        }
    }
}

impl Slot {
    pub fn state(&self) -> SlotState {
        *self.state.borrow()
    }

    pub(super) fn set(&self, state: ProcState, new_process: bool) {
        let before = self.state().state;
        self.state.send_modify(|s| {
            s.state = state;
            if new_process {
                s.generation += 1;
            }
        });
        self.live.slot_changed(before.phase(), state.phase());
    }

    /// The instances this slot's process (or internal threads) opened.
    pub fn instances(&self, core: &cumulo_router::Core) -> Vec<InstanceId> {
        match &*self.token.borrow() {
            Some(t) => core.process_instances(t),
            None => self.internal_ids.borrow().iter().copied().filter(|i| core.has_instance(i)).collect(),
        }
    }

    /// The shard serving each connected instance of its process, in
    /// thread order (an internal slot's run on shard 0).
    pub fn shards(&self, core: &cumulo_router::Core) -> Vec<u32> {
        match &*self.token.borrow() {
            Some(t) => core.process_shards(t),
            None => vec![0; self.instances(core).len()],
        }
    }

    /// Patterns its instances subscribe (counted once per subscription).
    pub fn subscriptions(&self, core: &cumulo_router::Core) -> usize {
        self.instances(core).iter().filter_map(|i| core.instance(i)).map(|i| i.subscriptions().len()).sum()
    }

    pub(super) async fn wait_stopped(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.state == ProcState::Stopped).await;
    }
}

/// A service the supervisor runs.
pub struct Service {
    pub id: ServiceId,
    pub prefix: Rc<str>,
    pub(super) cfg: RefCell<ServiceConfig>,
    pub(super) options: RefCell<Rc<ServiceOptions>>,
    pub metrics: Rc<ServiceMetrics>,
    /// Restart times within `max_t`, to apply `max_r`.
    pub(super) restart_times: RefCell<VecDeque<Instant>>,
    pub(super) removing: CancellationToken,
    pub(super) slots: RefCell<BTreeMap<u32, Rc<Slot>>>,
    /// A rolling restart asked through the admin API is under way.
    pub(super) rolling: Cell<bool>,
    /// Its entry in the router's table of services (`Availability`).
    pub(super) live: Arc<ServiceLive>,
    pub added: SystemTime,
}

impl Service {
    pub fn config(&self) -> Ref<'_, ServiceConfig> {
        self.cfg.borrow()
    }

    /// Being removed (its processes stopping): no longer one of the running.
    pub fn is_removing(&self) -> bool {
        self.removing.is_cancelled()
    }

    pub fn is_internal(&self) -> bool {
        self.cfg.borrow().internal.is_some()
    }

    /// The slots that make up the service now (not those being scaled away).
    pub fn slots(&self) -> Vec<Rc<Slot>> {
        self.slots.borrow().values().filter(|s| !s.retired.get()).cloned().collect()
    }

    /// Restarts of all its processes after they exited on their own.
    pub fn restarts(&self) -> u64 {
        self.metrics.restarts.get()
    }

    /// starting, running, restarting, failed, stopping or stopped.
    pub fn status(&self) -> &'static str {
        let states: Vec<SlotState> = self.slots().iter().map(|s| s.state()).collect();
        let any = |p: ProcState| states.iter().any(|s| s.state == p);
        if self.removing.is_cancelled() {
            return if states.iter().all(|s| s.state == ProcState::Stopped) { "stopped" } else { "stopping" };
        }
        if any(ProcState::Failed) {
            "failed"
        } else if self.rolling.get()
            || any(ProcState::Restarting)
            || any(ProcState::Stopping)
            || states.iter().any(|s| s.state == ProcState::Starting && s.generation > 1)
        {
            "restarting"
        } else if any(ProcState::Starting) {
            "starting"
        } else {
            "running"
        }
    }

    /// Counts a restart if `max_r` within `max_t` allows it.
    pub(super) fn may_restart(&self) -> bool {
        let (max_r, max_t) = {
            let c = self.cfg.borrow();
            (c.max_r, c.max_t)
        };
        let mut times = self.restart_times.borrow_mut();
        let now = Instant::now();
        let window = Duration::from_secs(max_t as u64);
        while times.front().is_some_and(|t| now.duration_since(*t) > window) {
            times.pop_front();
        }
        if times.len() as u32 >= max_r {
            return false;
        }
        times.push_back(now);
        true
    }
}

/// Why a process slot is being stopped, for its log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    ShuttingDown,
    ServiceRemoved,
    CountProcessLowered,
    RestartRequested,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::ShuttingDown => "the core is shutting down",
            StopReason::ServiceRemoved => "service removed",
            StopReason::CountProcessLowered => "count_process lowered",
            StopReason::RestartRequested => "restart requested",
        })
    }
}
