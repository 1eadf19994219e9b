//! Changes to running services, asked through the admin API: removal,
//! rolling restart, new options (more or fewer processes).

use super::process::KILL_GRACE;
use super::{ProcState, SlotState, StopReason, Supervisor};
use cumulo_config::ServiceConfig;
use cumulo_router::ServiceId;
use std::rc::Rc;
use std::time::Duration;

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
    pub queue_size: Option<u32>,
    pub dest_refresh: Option<cumulo_config::DestRefresh>,
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
        "queue_size",
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
        set(&mut c.queue_size, self.queue_size);
        set(&mut c.max_r, self.max_r);
        set(&mut c.max_t, self.max_t);
        set(&mut c.restart_delay, self.restart_delay);
        if let Some(d) = self.dest_refresh {
            c.dest_refresh = d;
        }
    }
}

impl Supervisor {
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
        // Its names are no one's from now on: NO_SERVICE, not a wait.
        self.core.borrow().availability().unregister(id);
        tracing::info!(service = %svc.prefix, service_id = id, "removing service: no new requests; terminating its {} processes", slots.len());
        {
            let why = format!("service {id} ({}) was removed before the request was handled", svc.prefix);
            let terminate_ms = svc.options.borrow().timeout_terminate;
            let mut core = self.core.borrow_mut();
            for slot in &slots {
                slot.stop_reason.set(StopReason::ServiceRemoved);
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

    /// Waits until every instance of a service subscribes something (its
    /// processes started and subscribed), at most `limit`; whether they do.
    pub async fn wait_serving(&self, id: ServiceId, limit: Duration) -> bool {
        let Ok(svc) = self.get(id) else { return false };
        let want = {
            let c = svc.config();
            c.count_process * c.count_thread
        };
        let end = tokio::time::Instant::now() + limit;
        while svc.live.serving() < want {
            if tokio::time::Instant::now() >= end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
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
    /// does). Timeouts, queue_limit, queue_size and dest_refresh apply from
    /// the next request on (a lowered limit refuses new requests; what is
    /// queued already stays); max_r, max_t, restart_delay and timeout_init from the next
    /// restart on.
    pub fn update(self: &Rc<Self>, id: ServiceId, changes: &ServiceChanges) -> Result<(), OpError> {
        let svc = self.get(id)?;
        if svc.removing.is_cancelled() {
            return Err(OpError::Conflict(format!("service {id} ({}) is being removed", svc.prefix)));
        }
        let old = svc.config().clone();
        let mut new = old.clone();
        changes.apply(&mut new);
        cumulo_config::validate_service(&format!("service {id} ({})", svc.prefix), &new, crate::catalogue::checks())
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
                slot.stop_reason.set(StopReason::CountProcessLowered);
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
