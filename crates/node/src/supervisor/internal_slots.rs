//! Slots of internal services: `count_thread` instances of a service built
//! into the core, run as tasks on the core's event loop.

use super::{ProcState, Service, Slot, Supervisor};
use crate::api::InternalApi;
use std::rc::Rc;
use tokio_util::sync::CancellationToken;

impl Supervisor {
    /// Runs one slot of an internal service: `count_thread` instances on the
    /// core's event loop, until stopped or restarted.
    pub(super) async fn internal_loop(&self, svc: &Rc<Service>, slot: &Rc<Slot>) {
        loop {
            let cfg = svc.config().clone();
            let name = cfg.internal.clone().unwrap_or_default();
            let cancel = CancellationToken::new();
            // An instance whose task ends by itself (a service that stops,
            // as `chaos` does on purpose) is a crash: the slot restarts.
            let ended = Rc::new(tokio::sync::Notify::new());
            let mut tasks = Vec::new();
            let mut ids = Vec::new();
            slot.set(ProcState::Starting, true);
            for _ in 0..cfg.count_thread {
                let options = svc.options.borrow().clone();
                let created =
                    crate::catalogue::create(&name, &cfg.settings).map_err(|m| m.to_string()).and_then(|service| {
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
                        .map_err(|e| e.why)?;
                        Ok((service, api))
                    });
                match created {
                    Ok((service, api)) => {
                        ids.push(api.instance_id());
                        let (cancel, ended) = (cancel.clone(), ended.clone());
                        tasks.push(tokio::task::spawn_local(async move {
                            tokio::select! {
                                _ = service.run(api) => ended.notify_one(),
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
            // An HTTP gateway runs on every shard: the others start (or
            // restart) their instances of this slot as this one did. One
            // with WebSocket paths stays on this shard, where its sessions'
            // limits, unique names and admin listing are one table.
            let websockets = cfg.settings.contains_key("websocket");
            let shards = self.shards.get().filter(|_| name == "http" && !websockets);
            if let Some(links) = shards {
                let options = svc.options.borrow().as_ref().clone();
                let spec = || {
                    Some(crate::shards::GatewaySpec {
                        prefix: svc.prefix.to_string(),
                        settings: cfg.settings.clone(),
                        options: options.clone(),
                        count_process: cfg.count_process,
                        count_thread: cfg.count_thread,
                    })
                };
                links.order_gateway((svc.id, slot.index), cfg.timeout_terminate, spec).await;
            }
            slot.set(ProcState::Running, false);
            let restart = tokio::select! {
                _ = slot.restart.notified() => true,
                _ = slot.stop.cancelled() => false,
                _ = ended.notified() => self.after_internal_exit(svc, slot, &cfg).await,
            };
            slot.set(ProcState::Stopping, false);
            let why = format!("internal service {} ({}) stopped before handling the request", svc.id, svc.prefix);
            self.core.borrow_mut().retire_instances(&ids, cfg.timeout_terminate, &why);
            if let Some(links) = shards {
                links.order_gateway((svc.id, slot.index), cfg.timeout_terminate, || None).await;
            }
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

    /// An instance of the slot stopped by itself: restart the slot after
    /// `restart_delay`, within `max_r` restarts in `max_t` as for a process
    /// (past it the slot is given up until an admin restart). Whether to.
    async fn after_internal_exit(
        &self,
        svc: &Rc<Service>,
        slot: &Rc<Slot>,
        cfg: &cumulo_config::ServiceConfig,
    ) -> bool {
        let index = slot.index;
        if !svc.may_restart() {
            tracing::error!(
                service = %svc.prefix, service_id = svc.id, process = index,
                "an internal instance stopped; giving up: more than {} restarts within {} s (max_r / max_t)",
                cfg.max_r, cfg.max_t
            );
            slot.set(ProcState::Failed, false);
            return tokio::select! {
                _ = slot.restart.notified() => true,
                _ = slot.stop.cancelled() => false,
            };
        }
        slot.restarts.set(slot.restarts.get() + 1);
        cumulo_router::bump(&svc.metrics.restarts);
        tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index,
            "an internal instance stopped by itself; restarting the slot in {} ms", cfg.restart_delay);
        slot.set(ProcState::Restarting, false);
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(cfg.restart_delay as u64)) => true,
            _ = slot.restart.notified() => true,
            _ = slot.stop.cancelled() => false,
        }
    }
}
