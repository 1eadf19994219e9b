//! The process supervisor: holds the services by id (from the config file,
//! and added, changed or removed at run time), runs each one's
//! `count_process` process slots, tells processes through their environment
//! how to connect, logs their output, restarts them within `max_r` restarts
//! per `max_t` seconds, and stops them gracefully (TERMINATE, then SIGTERM,
//! then SIGKILL).
//!
//! A slot is one process index of a service, run by one task for as long as
//! the slot exists: it starts the process, waits for it, restarts it, and
//! reports its state through a watch channel that the admin API reads and
//! waits on.

use crate::config::{Protocol, ServiceConfig, ServiceOptions};
use crate::instance::ServiceId;
use crate::internal::{self, InternalApi};
use crate::metrics::{bump, ServiceMetrics};
use crate::registry::InstanceId;
use crate::state::{ProcessSlot, Shared};
use std::cell::{Cell, Ref, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

/// Time between SIGTERM and SIGKILL when a process ignores SIGTERM.
const KILL_GRACE: Duration = Duration::from_secs(2);

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
    stop: CancellationToken,
    restart: Notify,
    state: watch::Sender<SlotState>,
    pub pid: Cell<Option<u32>>,
    /// The running process's token (its `ProcessSlot` in the core).
    token: RefCell<Option<Rc<str>>>,
    /// Instances of an internal service slot.
    internal_ids: RefCell<Vec<InstanceId>>,
    /// Restarts after the process exited on its own.
    pub restarts: Cell<u64>,
    /// Being stopped because count_process went down.
    retired: Cell<bool>,
    /// Why it is being stopped, for the log.
    stop_reason: Cell<&'static str>,
}

impl Slot {
    pub fn state(&self) -> SlotState {
        *self.state.borrow()
    }

    fn set(&self, state: ProcState, new_process: bool) {
        self.state.send_modify(|s| {
            s.state = state;
            if new_process {
                s.generation += 1;
            }
        });
    }

    /// The instances this slot's process (or internal threads) opened.
    pub fn instances(&self, core: &crate::state::Core) -> Vec<InstanceId> {
        match &*self.token.borrow() {
            Some(t) => core.process_instances(t),
            None => self.internal_ids.borrow().iter().copied().filter(|i| core.instances.contains_key(i)).collect(),
        }
    }

    /// Patterns its instances subscribe (counted once per subscription).
    pub fn subscriptions(&self, core: &crate::state::Core) -> usize {
        self.instances(core).iter().filter_map(|i| core.instances.get(i)).map(|i| i.subscriptions.len()).sum()
    }

    async fn wait_stopped(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.state == ProcState::Stopped).await;
    }
}

/// A service the supervisor runs.
pub struct Service {
    pub id: ServiceId,
    pub prefix: Rc<str>,
    cfg: RefCell<ServiceConfig>,
    options: RefCell<Rc<ServiceOptions>>,
    pub metrics: Rc<ServiceMetrics>,
    /// Restart times within `max_t`, to apply `max_r`.
    restart_times: RefCell<VecDeque<Instant>>,
    removing: CancellationToken,
    slots: RefCell<BTreeMap<u32, Rc<Slot>>>,
    /// A rolling restart asked through the admin API is under way.
    rolling: Cell<bool>,
    pub added: SystemTime,
}

impl Service {
    pub fn config(&self) -> Ref<'_, ServiceConfig> {
        self.cfg.borrow()
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
    fn may_restart(&self) -> bool {
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

/// Why an operation on a service was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    NotFound(String),
    /// It cannot be done in the service's current state.
    Conflict(String),
    /// A field's value is not allowed.
    Invalid {
        field: String,
        reason: String,
    },
}

/// Options of a running service that may change without restarting it
/// (`PATCH /v1/services/{id}`); `None` keeps the current value.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceChanges {
    pub count_process: Option<u32>,
    pub timeout_init: Option<u32>,
    pub timeout_async: Option<u32>,
    pub timeout_sync: Option<u32>,
    pub timeout_terminate: Option<u32>,
    pub queue_limit: Option<u32>,
    pub dest_refresh: Option<crate::config::DestRefresh>,
    pub max_r: Option<u32>,
    pub max_t: Option<u32>,
    pub restart_delay: Option<u32>,
}

impl ServiceChanges {
    /// The keys a change may name, for error messages and docs.
    pub const FIELDS: &'static [&'static str] = &[
        "count_process",
        "timeout_init",
        "timeout_async",
        "timeout_sync",
        "timeout_terminate",
        "queue_limit",
        "dest_refresh",
        "max_r",
        "max_t",
        "restart_delay",
    ];

    fn apply(&self, c: &mut ServiceConfig) {
        let set = |to: &mut u32, v: Option<u32>| {
            if let Some(v) = v {
                *to = v;
            }
        };
        set(&mut c.count_process, self.count_process);
        set(&mut c.timeout_init, self.timeout_init);
        set(&mut c.timeout_async, self.timeout_async);
        set(&mut c.timeout_sync, self.timeout_sync);
        set(&mut c.timeout_terminate, self.timeout_terminate);
        set(&mut c.queue_limit, self.queue_limit);
        set(&mut c.max_r, self.max_r);
        set(&mut c.max_t, self.max_t);
        set(&mut c.restart_delay, self.restart_delay);
        if let Some(d) = self.dest_refresh {
            c.dest_refresh = d;
        }
    }
}

pub struct Supervisor {
    core: Shared,
    /// The config file's folder: relative paths are resolved against it.
    base_dir: PathBuf,
    socket_env: String,
    services: RefCell<BTreeMap<ServiceId, Rc<Service>>>,
    next_id: Cell<ServiceId>,
    pub stopping: CancellationToken,
    /// Slot tasks still running.
    running: Cell<usize>,
    all_stopped: Notify,
}

impl Supervisor {
    pub fn new(core: Shared, base_dir: PathBuf, socket_env: String) -> Rc<Supervisor> {
        Rc::new(Supervisor {
            core,
            base_dir,
            socket_env,
            services: RefCell::new(BTreeMap::new()),
            next_id: Cell::new(1),
            stopping: CancellationToken::new(),
            running: Cell::new(0),
            all_stopped: Notify::new(),
        })
    }

    /// Starts the services of the config file; they get ids 1, 2, ... in
    /// file order.
    pub fn start_all(self: &Rc<Self>, services: &[ServiceConfig]) -> Vec<ServiceId> {
        services.iter().map(|s| self.add(s.clone())).collect()
    }

    /// Adds a service (already validated) and starts its processes.
    pub fn add(self: &Rc<Self>, cfg: ServiceConfig) -> ServiceId {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let svc = Rc::new(Service {
            id,
            prefix: Rc::from(cfg.prefix.as_str()),
            options: RefCell::new(Rc::new(cfg.options())),
            cfg: RefCell::new(cfg),
            metrics: Rc::default(),
            restart_times: RefCell::new(VecDeque::new()),
            removing: self.stopping.child_token(),
            slots: RefCell::new(BTreeMap::new()),
            rolling: Cell::new(false),
            added: SystemTime::now(),
        });
        self.services.borrow_mut().insert(id, svc.clone());
        tracing::info!(service = %svc.prefix, service_id = id, "service added: {}", describe(&svc.config()));
        for index in 0..svc.config().count_process {
            self.start_slot(&svc, index);
        }
        id
    }

    pub fn get(&self, id: ServiceId) -> Result<Rc<Service>, OpError> {
        self.services.borrow().get(&id).cloned().ok_or_else(|| OpError::NotFound(format!("no service with id {id}")))
    }

    /// Every service, by id.
    pub fn services(&self) -> Vec<Rc<Service>> {
        self.services.borrow().values().cloned().collect()
    }

    /// The longest `timeout_terminate` of any service (what a shutdown gives
    /// everyone).
    pub fn max_terminate_timeout(&self) -> u32 {
        self.services.borrow().values().map(|s| s.config().timeout_terminate).max().unwrap_or(2_000)
    }

    fn start_slot(self: &Rc<Self>, svc: &Rc<Service>, index: u32) {
        let slot = Rc::new(Slot {
            index,
            stop: svc.removing.child_token(),
            restart: Notify::new(),
            state: watch::Sender::new(SlotState { state: ProcState::Starting, generation: 0 }),
            pid: Cell::new(None),
            token: RefCell::new(None),
            internal_ids: RefCell::new(Vec::new()),
            restarts: Cell::new(0),
            retired: Cell::new(false),
            stop_reason: Cell::new("the core is shutting down"),
        });
        svc.slots.borrow_mut().insert(index, slot.clone());
        self.running.set(self.running.get() + 1);
        let (me, svc) = (self.clone(), svc.clone());
        tokio::task::spawn_local(async move {
            if svc.is_internal() {
                me.internal_loop(&svc, &slot).await;
            } else {
                me.process_loop(&svc, &slot).await;
            }
            slot.set(ProcState::Stopped, false);
            if slot.retired.get() {
                let mut slots = svc.slots.borrow_mut();
                if slots.get(&slot.index).is_some_and(|s| Rc::ptr_eq(s, &slot)) {
                    slots.remove(&slot.index);
                }
            }
            me.running.set(me.running.get() - 1);
            if me.running.get() == 0 {
                me.all_stopped.notify_one();
            }
        });
    }

    /// Removes a service: it stops getting requests at once (its
    /// subscriptions end; what was queued for it goes to another service
    /// subscribing the same pattern, else fails with SHUTTING_DOWN), its
    /// instances get TERMINATE and finish what they hold, and its processes
    /// are stopped. Returns once they all have.
    pub async fn remove(self: &Rc<Self>, id: ServiceId) -> Result<(), OpError> {
        let svc = self.get(id)?;
        if svc.removing.is_cancelled() {
            return Err(OpError::Conflict(format!("service {id} ({}) is already being removed", svc.prefix)));
        }
        let slots = svc.slots.borrow().values().cloned().collect::<Vec<_>>();
        tracing::info!(service = %svc.prefix, service_id = id, "removing service: no new requests; terminating its {} processes", slots.len());
        {
            let why = format!("service {id} ({}) was removed before the request was handled", svc.prefix);
            let terminate_ms = svc.options.borrow().timeout_terminate;
            let mut core = self.core.borrow_mut();
            for slot in &slots {
                slot.stop_reason.set("service removed");
                if let Some(t) = &*slot.token.borrow() {
                    core.retire_process(t, terminate_ms, &why);
                }
                let ids = slot.internal_ids.borrow().clone();
                core.retire_instances(&ids, terminate_ms, &why);
            }
        }
        svc.removing.cancel();
        // Finish in a task of its own, so the removal completes even if the
        // caller goes away.
        let me = self.clone();
        let done = tokio::task::spawn_local(async move {
            for slot in &slots {
                slot.wait_stopped().await;
            }
            me.services.borrow_mut().remove(&id);
            tracing::info!(service = %svc.prefix, service_id = id, "service removed: {} processes stopped", slots.len());
        });
        let _ = done.await;
        Ok(())
    }

    /// Restarts a service's processes one after the other (each is
    /// terminated gracefully, and the next waits until it is running again),
    /// so a service with several processes keeps answering. A slot that gave
    /// up is started again with a fresh `max_r` budget. Returns at once.
    pub fn restart(self: &Rc<Self>, id: ServiceId) -> Result<(), OpError> {
        let svc = self.get(id)?;
        if svc.removing.is_cancelled() {
            return Err(OpError::Conflict(format!("service {id} ({}) is being removed", svc.prefix)));
        }
        if svc.rolling.replace(true) {
            return Err(OpError::Conflict(format!("service {id} ({}) is already restarting", svc.prefix)));
        }
        svc.restart_times.borrow_mut().clear();
        tracing::info!(service = %svc.prefix, service_id = id, "restarting service: one process after the other");
        let core = self.core.clone();
        tokio::task::spawn_local(async move {
            for slot in svc.slots() {
                if svc.removing.is_cancelled() {
                    break;
                }
                // Connected is not yet serving: the next process stops only
                // once this one subscribed again what it did before.
                let subscribed = slot.subscriptions(&core.borrow());
                let mut rx = slot.state.subscribe();
                let before = rx.borrow().generation;
                slot.restart.notify_one();
                let limit = {
                    let c = svc.config();
                    Duration::from_millis(c.timeout_terminate as u64 + c.timeout_init as u64 + c.restart_delay as u64)
                        + 2 * KILL_GRACE
                };
                let settled = |s: &SlotState| {
                    (s.generation > before && s.state != ProcState::Starting) || s.state == ProcState::Stopped
                };
                let back = async {
                    let _ = rx.wait_for(settled).await;
                    while slot.state().state == ProcState::Running && slot.subscriptions(&core.borrow()) < subscribed {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                if tokio::time::timeout(limit, back).await.is_err() {
                    tracing::warn!(service = %svc.prefix, service_id = svc.id, process = slot.index,
                        "process {} did not come back within {limit:?}; restarting the next one anyway", slot.index);
                }
            }
            svc.rolling.set(false);
            tracing::info!(service = %svc.prefix, service_id = svc.id, "service restarted");
        });
        Ok(())
    }

    /// Changes a running service's options. More processes start at once;
    /// fewer stop the highest process indexes gracefully (as a removal
    /// does). Timeouts, queue_limit and dest_refresh apply from the next
    /// request on; max_r, max_t, restart_delay and timeout_init from the next
    /// restart on.
    pub fn update(self: &Rc<Self>, id: ServiceId, changes: &ServiceChanges) -> Result<(), OpError> {
        let svc = self.get(id)?;
        if svc.removing.is_cancelled() {
            return Err(OpError::Conflict(format!("service {id} ({}) is being removed", svc.prefix)));
        }
        let old = svc.config().clone();
        let mut new = old.clone();
        changes.apply(&mut new);
        crate::config::validate_service(&format!("service {id} ({})", svc.prefix), &new)
            .map_err(|(field, reason)| OpError::Invalid { field, reason })?;
        if new.count_process > old.count_process {
            let busy: Vec<u32> = svc
                .slots
                .borrow()
                .keys()
                .copied()
                .filter(|i| (old.count_process..new.count_process).contains(i))
                .collect();
            if !busy.is_empty() {
                return Err(OpError::Conflict(format!(
                    "process slots {busy:?} of service {id} are still stopping from an earlier change; try again when they are gone"
                )));
            }
        }
        let options = Rc::new(new.options());
        *svc.options.borrow_mut() = options.clone();
        self.core.borrow_mut().set_service_options(id, &options);
        *svc.cfg.borrow_mut() = new.clone();
        tracing::info!(service = %svc.prefix, service_id = id, "service updated: {}", describe_changes(&old, &new));
        for index in old.count_process..new.count_process {
            self.start_slot(&svc, index);
        }
        if new.count_process < old.count_process {
            let why = format!(
                "process of service {id} ({}) was stopped (count_process lowered) before handling the request",
                svc.prefix
            );
            let mut core = self.core.borrow_mut();
            for slot in svc.slots.borrow().values().filter(|s| s.index >= new.count_process) {
                slot.retired.set(true);
                slot.stop_reason.set("count_process lowered");
                if let Some(t) = &*slot.token.borrow() {
                    core.retire_process(t, new.timeout_terminate, &why);
                }
                let ids = slot.internal_ids.borrow().clone();
                core.retire_instances(&ids, new.timeout_terminate, &why);
                slot.stop.cancel();
            }
        }
        Ok(())
    }

    /// Runs one process slot: start, wait, restart, until stopped.
    async fn process_loop(&self, svc: &Rc<Service>, slot: &Rc<Slot>) {
        let index = slot.index;
        loop {
            if slot.stop.is_cancelled() {
                return;
            }
            let cfg = svc.config().clone();
            let token: Rc<str> = Rc::from(new_token());
            let ready = Rc::new(Notify::new());
            self.core.borrow_mut().processes.insert(
                token.clone(),
                ProcessSlot {
                    service: svc.id,
                    prefix: svc.prefix.clone(),
                    process_index: index,
                    process_count: cfg.count_process,
                    thread_count: cfg.count_thread,
                    options: svc.options.borrow().clone(),
                    metrics: svc.metrics.clone(),
                    retiring: false,
                    threads: vec![None; cfg.count_thread as usize],
                    ready: ready.clone(),
                    pid: None,
                },
            );
            *slot.token.borrow_mut() = Some(token.clone());
            slot.set(ProcState::Starting, true);
            let outcome = match self.spawn(svc, &cfg, index, &token) {
                Ok(child) => {
                    slot.pid.set(child.id());
                    self.watch(svc, slot, &cfg, &token, child, ready).await
                }
                Err(e) => {
                    tracing::error!(service = %svc.prefix, service_id = svc.id, process = index,
                        "cannot start {}: {e}", cfg.path.as_deref().unwrap_or("?"));
                    Outcome::Exited
                }
            };
            self.core.borrow_mut().processes.remove(&token);
            *slot.token.borrow_mut() = None;
            slot.pid.set(None);
            match outcome {
                Outcome::Stopped => return,
                Outcome::Restart => continue,
                Outcome::Exited if slot.stop.is_cancelled() => return,
                Outcome::Exited => {}
            }
            if !svc.may_restart() {
                tracing::error!(
                    service = %svc.prefix, service_id = svc.id, process = index,
                    "giving up: more than {} restarts within {} s (max_r / max_t); process {index} stays down until restarted",
                    cfg.max_r, cfg.max_t
                );
                slot.set(ProcState::Failed, false);
                tokio::select! {
                    _ = slot.restart.notified() => continue,
                    _ = slot.stop.cancelled() => return,
                }
            }
            slot.restarts.set(slot.restarts.get() + 1);
            bump(&svc.metrics.restarts);
            tracing::info!(service = %svc.prefix, service_id = svc.id, process = index,
                "restarting process {index} in {} ms (restart {} of {} allowed within {} s)",
                cfg.restart_delay, svc.restart_times.borrow().len(), cfg.max_r, cfg.max_t);
            slot.set(ProcState::Restarting, false);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(cfg.restart_delay as u64)) => {}
                _ = slot.restart.notified() => {}
                _ = slot.stop.cancelled() => return,
            }
        }
    }

    /// Runs one slot of an internal service: `count_thread` instances on the
    /// core's event loop, until stopped or restarted.
    async fn internal_loop(&self, svc: &Rc<Service>, slot: &Rc<Slot>) {
        loop {
            let cfg = svc.config().clone();
            let name = cfg.internal.clone().unwrap_or_default();
            let cancel = CancellationToken::new();
            let mut tasks = Vec::new();
            let mut ids = Vec::new();
            slot.set(ProcState::Starting, true);
            for _ in 0..cfg.count_thread {
                let options = svc.options.borrow().clone();
                let created = internal::create(&name, &cfg.settings).map_err(|m| m.to_string()).and_then(|service| {
                    let api = InternalApi::connect(
                        &self.core,
                        &svc.prefix,
                        options,
                        svc.metrics.clone(),
                        svc.id,
                        slot.index,
                        cfg.count_process,
                        cfg.count_thread,
                    )
                    .map_err(|(_, m)| m)?;
                    Ok((service, api))
                });
                match created {
                    Ok((service, api)) => {
                        ids.push(api.instance_id());
                        let cancel = cancel.clone();
                        tasks.push(tokio::task::spawn_local(async move {
                            tokio::select! {
                                _ = service.run(api) => {}
                                _ = cancel.cancelled() => {}
                            }
                        }));
                    }
                    Err(why) => {
                        tracing::error!(service = %svc.prefix, service_id = svc.id, process = slot.index, "cannot start internal {name}: {why}")
                    }
                }
            }
            *slot.internal_ids.borrow_mut() = ids.clone();
            slot.set(ProcState::Running, false);
            let restart = tokio::select! {
                _ = slot.restart.notified() => true,
                _ = slot.stop.cancelled() => false,
            };
            slot.set(ProcState::Stopping, false);
            let why = format!("internal service {} ({}) stopped before handling the request", svc.id, svc.prefix);
            self.core.borrow_mut().retire_instances(&ids, cfg.timeout_terminate, &why);
            cancel.cancel();
            for t in tasks {
                let _ = t.await;
            }
            slot.internal_ids.borrow_mut().clear();
            if !restart {
                return;
            }
        }
    }

    fn spawn(&self, svc: &Service, cfg: &ServiceConfig, index: u32, token: &str) -> std::io::Result<Child> {
        let path = cfg.path.as_deref().unwrap_or_default();
        let program: PathBuf =
            if path.contains('/') && !path.starts_with('/') { self.base_dir.join(path) } else { PathBuf::from(path) };
        let dir = match &cfg.dir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => self.base_dir.join(d),
            None => self.base_dir.clone(),
        };
        let mut cmd = Command::new(&program);
        cmd.args(&cfg.args).current_dir(dir).envs(&cfg.env);
        // CloudI-protocol processes get one socket per thread as descriptor
        // 3 + thread index; the core keeps the other ends.
        let mut cloudi_sockets = Vec::new();
        let mut child_fds = Vec::new();
        match cfg.protocol {
            Protocol::Cumulo => {
                cmd.env("CUMULO_SOCKET", &self.socket_env)
                    .env("CUMULO_TOKEN", token)
                    .env("CUMULO_PROCESS_INDEX", index.to_string())
                    .env("CUMULO_PROCESS_COUNT", cfg.count_process.to_string())
                    .env("CUMULO_THREAD_COUNT", cfg.count_thread.to_string())
                    .env("CUMULO_PREFIX", &cfg.prefix);
            }
            Protocol::Cloudi => {
                let mut theirs = Vec::new();
                for _ in 0..cfg.count_thread {
                    let (ours, their) = std::os::unix::net::UnixStream::pair()?;
                    cloudi_sockets.push(ours);
                    theirs.push(std::os::fd::OwnedFd::from(their));
                }
                crate::os::pass_fds(&mut cmd, &theirs);
                cmd.env("CLOUDI_API_INIT_PROTOCOL", "local")
                    .env("CLOUDI_API_INIT_BUFFER_SIZE", crate::cloudi::BUFFER_SIZE.to_string())
                    .env("CLOUDI_API_INIT_THREAD_COUNT", cfg.count_thread.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_INDEX", index.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_COUNT_MAX", cfg.count_process.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_COUNT_MIN", cfg.count_process.to_string())
                    .env("CLOUDI_API_INIT_TIMEOUT_INITIALIZE", cfg.timeout_init.to_string())
                    .env("CLOUDI_API_INIT_TIMEOUT_TERMINATE", cfg.timeout_terminate.to_string());
                // Open until the spawn below has run the pre_exec hook.
                child_fds = theirs;
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
        crate::os::die_with_parent(&mut cmd);
        let mut child = cmd.spawn()?;
        drop(child_fds); // the child's ends of CloudI socket pairs, in the core
        for (thread_index, sock) in cloudi_sockets.into_iter().enumerate() {
            sock.set_nonblocking(true)?;
            let stream = tokio::net::UnixStream::from_std(sock)?;
            let task = crate::cloudi::connection::run(
                self.core.clone(),
                stream,
                Rc::from(token),
                thread_index as u32,
                svc.prefix.clone(),
            );
            tokio::task::spawn_local(task);
        }
        let pid = child.id();
        if let Some(slot) = self.core.borrow_mut().processes.get_mut(token) {
            slot.pid = pid;
        }
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} started (pid {})", pid.unwrap_or(0));
        if let Some(out) = child.stdout.take() {
            tokio::task::spawn_local(log_lines(out, svc.prefix.clone(), svc.id, index, false));
        }
        if let Some(err) = child.stderr.take() {
            tokio::task::spawn_local(log_lines(err, svc.prefix.clone(), svc.id, index, true));
        }
        Ok(child)
    }

    /// Waits for a process: its init (every thread connected within
    /// timeout_init), then its exit, a stop or a restart request.
    async fn watch(
        &self,
        svc: &Service,
        slot: &Slot,
        cfg: &ServiceConfig,
        token: &str,
        mut child: Child,
        ready: Rc<Notify>,
    ) -> Outcome {
        let index = slot.index;
        let init = Duration::from_millis(cfg.timeout_init as u64);
        tokio::select! {
            _ = ready.notified() => {}
            _ = tokio::time::sleep(init) => {
                let connected = self.core.borrow().processes.get(token)
                    .map_or(0, |s| s.threads.iter().filter(|t| t.is_some()).count());
                tracing::error!(service = %svc.prefix, service_id = svc.id, process = index,
                    "init failed: {connected} of {} threads connected within timeout_init ({} ms); killing it",
                    cfg.count_thread, cfg.timeout_init);
                let _ = child.start_kill();
                let status = child.wait().await.ok();
                log_exit(svc, index, status);
                return Outcome::Exited;
            }
            status = child.wait() => {
                let status = status.ok();
                tracing::error!(service = %svc.prefix, service_id = svc.id, process = index, "init failed: the process exited before connecting");
                log_exit(svc, index, status);
                return Outcome::Exited;
            }
            _ = slot.stop.cancelled() => return self.terminate(svc, slot, token, child, slot.stop_reason.get()).await,
            _ = slot.restart.notified() => {
                self.terminate(svc, slot, token, child, "restart requested").await;
                return Outcome::Restart;
            }
        }
        tracing::debug!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} initialized");
        slot.set(ProcState::Running, false);
        tokio::select! {
            status = child.wait() => {
                log_exit(svc, index, status.ok());
                Outcome::Exited
            }
            _ = slot.stop.cancelled() => self.terminate(svc, slot, token, child, slot.stop_reason.get()).await,
            _ = slot.restart.notified() => {
                self.terminate(svc, slot, token, child, "restart requested").await;
                Outcome::Restart
            }
        }
    }

    /// Stops a process gracefully: its instances stop getting requests and
    /// get TERMINATE (on a core shutdown they already have); it has
    /// timeout_terminate to finish what it holds and exit, then SIGTERM,
    /// then SIGKILL.
    async fn terminate(&self, svc: &Service, slot: &Slot, token: &str, mut child: Child, why: &str) -> Outcome {
        let index = slot.index;
        slot.set(ProcState::Stopping, false);
        let terminate_ms = svc.options.borrow().timeout_terminate;
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "stopping process {index} ({why}): TERMINATE, {terminate_ms} ms to finish");
        let lost =
            format!("process {index} of service {} ({}) stopped before handling the request", svc.id, svc.prefix);
        self.core.borrow_mut().retire_process(token, terminate_ms, &lost);
        let grace = Duration::from_millis(terminate_ms as u64);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        if let Some(pid) = child.id() {
            tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "still running {terminate_ms} ms after TERMINATE: SIGTERM");
            crate::os::signal(pid, libc::SIGTERM);
        }
        if let Ok(status) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "ignored SIGTERM: SIGKILL");
        let _ = child.start_kill();
        log_exit(svc, index, child.wait().await.ok());
        Outcome::Stopped
    }

    /// Stops every process and internal service; returns when all are gone.
    pub async fn stop_all(&self) {
        self.stopping.cancel();
        while self.running.get() > 0 {
            self.all_stopped.notified().await;
        }
    }

    /// Kills processes found hung by the keep-alive check.
    pub fn kill_hung(&self, pids: &[u32]) {
        for &pid in pids {
            crate::os::signal(pid, libc::SIGKILL);
        }
    }
}

enum Outcome {
    Exited,
    /// Stopped on request (removal, fewer processes, core shutdown).
    Stopped,
    /// Stopped to be started again at once (admin restart).
    Restart,
}

fn describe(svc: &ServiceConfig) -> String {
    match (&svc.internal, &svc.path) {
        (Some(name), _) => format!("internal {name}, {} x {} instances", svc.count_process, svc.count_thread),
        (_, Some(path)) => {
            let args = if svc.args.is_empty() { String::new() } else { format!(" {}", svc.args.join(" ")) };
            format!("{path}{args}, {} processes x {} threads", svc.count_process, svc.count_thread)
        }
        _ => String::new(),
    }
}

fn describe_changes(old: &ServiceConfig, new: &ServiceConfig) -> String {
    let (a, b) = (serde_json::to_value(old).unwrap_or_default(), serde_json::to_value(new).unwrap_or_default());
    let changed: Vec<String> = ServiceChanges::FIELDS
        .iter()
        .filter(|f| a.get(**f) != b.get(**f))
        .map(|f| format!("{f} {} -> {}", a[*f], b[*f]))
        .collect();
    if changed.is_empty() {
        "nothing changed".into()
    } else {
        changed.join(", ")
    }
}

fn log_exit(svc: &Service, index: u32, status: Option<ExitStatus>) {
    use std::os::unix::process::ExitStatusExt;
    let how = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exited with code {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        None => "exited (status unknown)".to_string(),
    };
    if status.is_some_and(|s| s.success()) {
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} {how}");
    } else {
        tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} {how}");
    }
}

async fn log_lines<R: tokio::io::AsyncRead + Unpin>(
    r: R,
    prefix: Rc<str>,
    service_id: ServiceId,
    index: u32,
    stderr: bool,
) {
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if stderr {
            tracing::warn!(target: "service", service = %prefix, service_id, process = index, "{line}");
        } else {
            tracing::info!(target: "service", service = %prefix, service_id, process = index, "{line}");
        }
    }
}

/// A token a process presents in HELLO: 128 random bits, so a process cannot
/// guess another's.
fn new_token() -> String {
    let mut b = [0u8; 16];
    crate::os::random_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
