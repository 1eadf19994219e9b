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
//!
//! Files by concern: `service.rs` (services and slots as the admin API sees
//! them), `operations.rs` (removal, rolling restart, new options),
//! `process.rs` (external processes: spawn, init, exit, graceful stop),
//! `output.rs` (their stdout and stderr as log records, a traceback as one),
//! `internal_slots.rs` (internal services' instances).

mod internal_slots;
mod operations;
mod output;
mod process;
mod service;

pub use operations::{OpError, ServiceChanges};
pub use service::{ProcState, Service, Slot, SlotState, StopReason};

use cumulo_config::ServiceConfig;
use cumulo_router::ServiceId;
use cumulo_router::Shared;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::SystemTime;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

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
    /// The other shards (`core.threads` > 1): HTTP gateways run on each.
    shards: std::cell::OnceCell<Rc<crate::shards::Links>>,
    /// The config's `[acl]` groups: services added through the admin API
    /// may name them in their dest_list_allow / dest_list_deny.
    acl_groups: std::cell::OnceCell<cumulo_config::AclGroups>,
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
            shards: std::cell::OnceCell::new(),
            acl_groups: std::cell::OnceCell::new(),
        })
    }

    /// The config's `[acl]` groups (set once, at start).
    pub fn set_acl_groups(&self, groups: cumulo_config::AclGroups) {
        let _ = self.acl_groups.set(groups);
    }

    pub fn acl_groups(&self) -> &cumulo_config::AclGroups {
        static NONE: cumulo_config::AclGroups = cumulo_config::AclGroups::new();
        self.acl_groups.get().unwrap_or(&NONE)
    }

    /// Lets the supervisor run HTTP gateways on the other shards too.
    pub fn set_shards(&self, links: Rc<crate::shards::Links>) {
        let _ = self.shards.set(links);
    }

    /// Replaces the resiliency policies on every shard (a reload); returns
    /// the shards that did not confirm in time.
    pub async fn set_policies(&self, policies: Vec<cumulo_config::policy::PolicyConfig>) -> Vec<u32> {
        crate::shards::policies::set_everywhere(&self.core, self.shards.get().map(|l| &**l), policies).await
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
        let live = self.core.borrow().availability().register(id, &cfg.prefix);
        let svc = Rc::new(Service {
            id,
            live,
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
            stop_reason: Cell::new(StopReason::ShuttingDown),
            live: svc.live.clone(),
        });
        svc.live.slot_added(ProcState::Starting.phase());
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
                    svc.live.slot_removed(ProcState::Stopped.phase());
                }
            }
            me.running.set(me.running.get() - 1);
            if me.running.get() == 0 {
                me.all_stopped.notify_one();
            }
        });
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
            cumulo_sys::signal(pid, libc::SIGKILL);
        }
    }
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
