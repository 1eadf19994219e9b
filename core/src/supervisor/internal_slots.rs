//! Slots of internal services: `count_thread` instances of a service built
//! into the core, run as tasks on the core's event loop.

use super::{ProcState, Service, Slot, Supervisor};
use crate::internal::InternalApi;
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
            let mut tasks = Vec::new();
            let mut ids = Vec::new();
            slot.set(ProcState::Starting, true);
            for _ in 0..cfg.count_thread {
                let options = svc.options.borrow().clone();
                let created =
                    crate::internal::create(&name, &cfg.settings).map_err(|m| m.to_string()).and_then(|service| {
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
}
