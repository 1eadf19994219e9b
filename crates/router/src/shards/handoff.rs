//! Service connections on every shard. Shard 0 reads a connection's HELLO
//! and admits it as it always has (token, process slot, thread_index,
//! window); with more than one shard it then picks the shard that serves it
//! (`Handoff::pick`), and when that is another shard it takes the socket out
//! of its runtime and hands it over (`Order::Adopt`) with everything the
//! instance needs there. That shard registers the instance under the id
//! shard 0 gave it, writes the WELCOME and runs the connection's read and
//! write loops (`listener::serve_admitted`). When the connection ends there,
//! the instance is removed there (what it held fails with CRASHED, its queue
//! is routed again) and shard 0 is told (`Message::Gone`), which frees the
//! process slot's thread as for a local instance.
//!
//! Shard 0 keeps the process slots, so it orders the retirement of an
//! instance elsewhere (`Order::Retire`) and new service options
//! (`Order::Options`); one task sends the orders in the order they were
//! made, so a retirement never overtakes the adoption it concerns.

use crate::instance::{Endpoint, Identity, Origin, ServiceId};
use crate::metrics::ServiceMetrics;
use crate::registry::InstanceId;
use crate::state::Core;
use ahash::AHashMap;
use cumulo_config::ServiceOptions;
use std::rc::Rc;
use tokio::sync::Notify;

/// A socket taken out of a runtime, to be registered in another.
pub enum StdSocket {
    Unix(std::os::unix::net::UnixStream),
    Tcp(std::net::TcpStream),
    /// A stream of a kind the router does not know (a TLS session, which
    /// cannot be taken apart): the listener that made it takes it back.
    Other(Box<dyn std::any::Any + Send>),
}

/// An instance admitted by shard 0 and served by another shard.
pub struct Adoption {
    /// Taken by the shard that serves it.
    pub socket: Option<StdSocket>,
    /// Who is at the other end (for logs).
    pub peer: String,
    /// Bytes read past the HELLO: the start of the next frames.
    pub rest: Vec<u8>,
    /// Given by shard 0 (unique across shards: shard 0 keeps it reserved
    /// until the instance is gone).
    pub id: InstanceId,
    pub prefix: String,
    pub label: String,
    /// The service, the process index and the process's token.
    pub origin: Option<(ServiceId, u32, String)>,
    pub options: ServiceOptions,
    pub window: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
}

/// What shard 0 orders the shard that serves an instance.
pub enum Order {
    Adopt(Box<Adoption>),
    /// Retire these instances (as `Core::retire_instances`).
    Retire {
        ids: Vec<InstanceId>,
        terminate_ms: u32,
        why: String,
    },
    /// A service's new options, for its instances there.
    Options {
        service: ServiceId,
        options: ServiceOptions,
    },
}

/// A shard's per-service counters (the instances it serves), in a form
/// that may cross threads: what a report from every shard sums.
#[derive(Debug, Clone, Default)]
pub struct ServiceCounters {
    pub service: Option<ServiceId>,
    pub received: u64,
    pub sent: u64,
    pub handled: u64,
    pub errors: u64,
}

/// The handoff's state in one shard's core.
#[derive(Default)]
pub struct Handoff {
    /// Shard 0: the instances it admitted that another shard serves, and
    /// which shard. Their ids stay reserved here (`Core::new_id`) and they
    /// count against `core.max_connections` until that shard says they
    /// are gone.
    pub shard_of: AHashMap<InstanceId, (u32, ServiceId)>,
    /// Orders waiting for the sending task, in the order they were made.
    orders: Vec<(u32, Order)>,
    wake: Rc<Notify>,
    /// Other shards: the per-service metrics of the instances adopted here
    /// (metrics are `Cell`s on one thread; each shard counts its own).
    pub metrics: AHashMap<ServiceId, Rc<ServiceMetrics>>,
    /// Shard 0: pids of processes whose instance another shard closed as
    /// hung, for the keep-alive round to kill.
    pub hung_pids: Vec<u32>,
}

/// The shard of `count` that serves a managed process's thread: by its
/// place among the service's threads, so that a service's processes spread
/// evenly and predictably (process 0 on shard 0, process 1 on shard 1, ...).
pub fn pick(count: u32, process_index: u32, thread_count: u32, thread_index: u32) -> u32 {
    ((process_index as u64 * thread_count as u64 + thread_index as u64) % count.max(1) as u64) as u32
}

impl Handoff {
    /// Queues an order for `shard`.
    pub fn order(&mut self, shard: u32, order: Order) {
        self.orders.push((shard, order));
        self.wake.notify_one();
    }

    /// Notified when orders are queued: the task that sends them waits on it.
    pub fn wake(&self) -> Rc<Notify> {
        self.wake.clone()
    }

    /// The orders queued, in the order they were made (to send).
    pub fn take_orders(&mut self) -> Vec<(u32, Order)> {
        std::mem::take(&mut self.orders)
    }
}

impl Core {
    /// Registers an instance another shard admitted (`Order::Adopt`) under
    /// the id it was given; returns its label.
    pub fn adopt(&mut self, a: &Adoption, endpoint: Endpoint) -> Result<(), String> {
        if self.shutting_down {
            return Err("the core is shutting down".into());
        }
        if self.instances.contains_key(&a.id) {
            return Err(format!("instance id {} is taken on shard {}", a.id, self.shard.index));
        }
        let (origin, metrics) = match &a.origin {
            Some((service, process_index, token)) => {
                let m = self.handoff.metrics.entry(*service).or_default().clone();
                (Some(Origin { service: *service, process_index: *process_index, token: Rc::from(&**token) }), m)
            }
            None => (None, self.unmanaged_metrics.clone()),
        };
        let who = Identity {
            prefix: Rc::from(&*a.prefix),
            label: a.label.clone(),
            origin,
            options: Rc::new(a.options.clone()),
            metrics,
            window: a.window,
            // Only managed processes are handed over.
            outside_services: false,
        };
        self.instances.insert(a.id, crate::instance::Instance::new(a.id, who, endpoint));
        tracing::debug!(instance = a.id, "{} connected on shard {} (window {})", a.label, self.shard.index, a.window);
        Ok(())
    }

    /// Shard 0: an instance another shard served is gone; its process
    /// slot's thread is free (as `remove_instance` frees a local one's).
    pub fn gone_elsewhere(&mut self, id: InstanceId, hung: bool) {
        if self.handoff.shard_of.remove(&id).is_none() {
            return;
        }
        for slot in self.processes.values_mut() {
            for t in slot.threads.iter_mut().filter(|t| **t == Some(id)) {
                *t = None;
                if hung {
                    self.handoff.hung_pids.extend(slot.pid);
                }
            }
        }
    }

    /// This shard's per-service counters of the instances adopted here (a
    /// report from every shard sums them with shard 0's).
    pub fn adopted_counters(&self) -> Vec<ServiceCounters> {
        let count = |service: Option<ServiceId>, m: &ServiceMetrics| ServiceCounters {
            service,
            received: m.received.get(),
            sent: m.sent.get(),
            handled: m.handled(),
            errors: m.errors.iter().map(std::cell::Cell::get).sum(),
        };
        let mut out: Vec<_> = self.handoff.metrics.iter().map(|(s, m)| count(Some(*s), m)).collect();
        if self.shard.index != 0 {
            out.push(count(None, &self.unmanaged_metrics));
        }
        out
    }
}
