//! Shards: the core on several threads (`core.threads`, docs/ARCHITECTURE.md).
//!
//! Each shard is a whole core on a thread of its own (a current-thread
//! runtime): its instances, registry, requests in flight and timers, with
//! no lock and no atomic on its routing path. The other shards are
//! pseudo-instances in it (`Endpoint::Shard`), as other nodes of a cluster
//! are (`Endpoint::Remote`): subscribed to a shard's patterns once per
//! instance there, so routing chooses among this shard's instances and other
//! shards with the same code, preferring this shard (`closest`). A request
//! for another shard is the REQUEST frame a socket would get, written to
//! that shard's pseudo-instance outbox; a writer task passes each batch to
//! the shard over a bounded FIFO channel; the shard routes it as a request
//! from its own pseudo-instance of the sender's shard, to an instance of its
//! own (or on to another node, never to a third shard), and the RESPONSE
//! comes back the same way. The sender's shard keeps the in-flight entry and
//! the timer, as the sender's node does in a cluster.
//!
//! Subscriptions are replicated by broadcast: when a shard's registry
//! changes, it sends the net change to its own subscriptions (pattern →
//! count added or removed, the registry's `Journal`) to every other shard,
//! whose pseudo-instance of it subscribes or unsubscribes as much. The
//! channels are FIFO, so deltas apply in the order they were made; each
//! carries a sequence number, and a gap (a bug) is logged. A burst of
//! changes is one message, and a change costs the other shards work in
//! proportion to it, not to the size of the registry.
//!
//! HTTP gateways run on every shard: shard 0's supervisor starts each one's
//! instances (from the config file or the admin API) and orders the other
//! shards to start theirs too, and to stop or restart them with it
//! (`Message::Gateway`), so a gateway changed at run time changes on every
//! shard.
//!
//! The resiliency policies are every shard's, each with its own breakers
//! and counters: shard 0 sets new ones (the admin API, a reload) and resets
//! breakers on every shard (`policies`).
//!
//! - `thread`: the threads of shards 1.. and the gateways they run;
//! - `tests`: requests, multicast and forwards across two shards.

pub mod handoff;
pub mod policies;
pub mod report;
pub mod thread;

/// The router's side of shards: the subscriptions each other shard's
/// instances hold, the shared round-robin cursors, and the flag bits that
/// carry a sender's dest_refresh between shards.
pub use cumulo_router::shards::{mirror, turns};

use cumulo_config::policy::PolicyConfig;
use cumulo_config::ServiceOptions;
use cumulo_proto::Frame;
use cumulo_router::InstanceId;
use cumulo_router::{Availability, Core, ShardIndex, Shared};
use cumulo_router::{Endpoint, Outbox};
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};

/// Messages waiting in one shard's inbox at most (each a batch of frames or
/// a subscription state): a shard that falls behind makes the writers of
/// the others wait, and their frames gather in their pseudo-instances'
/// outboxes, bounded by `core.max_outbox`.
pub const INBOX_MESSAGES: usize = 1024;

/// What one shard sends another.
pub enum Message {
    /// Frames routed to the receiving shard (REQUEST, RESPONSE), whole.
    Frames(Vec<u8>),
    /// The net change to the sender's own subscriptions since its previous
    /// `Subscriptions` (pattern and instance → count added, negative when
    /// removed); `sequence` counts them from 1.
    Subscriptions { sequence: u64, changes: Arc<[mirror::Change]> },
    /// Start (or restart with new settings) or stop one process slot of an
    /// HTTP gateway, as shard 0's supervisor did.
    Gateway(GatewayOrder),
    /// The core stops.
    Stop,

    /// The admin API asks for this shard's counters and instances
    /// (`report`); answered at once, on the sender given.
    Report(oneshot::Sender<report::ShardReport>),
    /// From shard 0: these resiliency policies replace the shard's (its
    /// breakers start over); answered once they are in force.
    Policies { policies: Arc<Vec<PolicyConfig>>, applied: oneshot::Sender<()> },
    /// From shard 0: close the breakers of `policy` on `pattern` (None:
    /// every one); answered with how many were open or half-open.
    ResetBreakers { policy: Option<String>, pattern: Option<String>, reset: oneshot::Sender<usize> },
    // Service connections served by other shards (`handoff`).
    /// From shard 0: adopt a connection, retire instances, new options.
    Order(handoff::Order),
    /// To shard 0: an instance handed over is gone (its connection ended;
    /// `hung`: closed by the keep-alive check, its process to be killed).
    Gone { id: InstanceId, hung: bool },
}

/// One process slot of an HTTP gateway service, for the other shards.
pub struct GatewayOrder {
    /// The service's id and the slot's index.
    pub slot: (u32, u32),
    /// What to run; None: stop it.
    pub start: Option<GatewaySpec>,
    /// How long its instances may finish what they hold when stopped.
    pub timeout_terminate: u32,
}

/// What a shard needs to run a gateway slot's instances.
pub struct GatewaySpec {
    pub prefix: String,
    pub settings: toml::Table,
    pub options: ServiceOptions,
    pub count_process: u32,
    pub count_thread: u32,
}

pub struct Envelope {
    pub from: u32,
    pub message: Message,
}

/// One shard's ends of the channels: its inbox, and a sender to every
/// shard's inbox (its own included, unused).
pub struct Ends {
    pub index: u32,
    pub inbox: mpsc::Receiver<Envelope>,
    pub peers: Vec<mpsc::Sender<Envelope>>,
    /// The round-robin cursors every shard shares.
    pub turns: turns::Turns,
    /// The configured services' states every shard reads (`Availability`).
    pub availability: Availability,
}

/// The channels between `count` shards, one `Ends` per shard.
pub fn channels(count: u32) -> Vec<Ends> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..count).map(|_| mpsc::channel(INBOX_MESSAGES)).unzip();
    let turns = turns::Turns::default();
    let availability = Availability::default();
    rxs.into_iter()
        .enumerate()
        .map(|(i, inbox)| Ends {
            index: i as u32,
            inbox,
            peers: txs.clone(),
            turns: turns.clone(),
            availability: availability.clone(),
        })
        .collect()
}

/// A shard's link to the others, once attached.
pub struct Links {
    pub index: u32,
    peers: Vec<mpsc::Sender<Envelope>>,
    /// Notified when another shard says the core stops (or all are gone).
    stop: Rc<Notify>,
    /// The pseudo-instance of each other shard in this core (0 for itself).
    pub pseudo: Rc<Vec<InstanceId>>,
    /// The gateway slots shard 0 ordered this shard to run.
    pub gateways: thread::Gateways,
    /// Asks the other shards for their reports (the admin API).
    pub reports: report::Asker,
}

impl Links {
    /// Tells every other shard that the core stops.
    pub fn stop_others(&self) {
        for (j, tx) in self.peers.iter().enumerate() {
            if j as u32 != self.index {
                let tx = tx.clone();
                let from = self.index;
                tokio::task::spawn_local(async move {
                    let _ = tx.send(Envelope { from, message: Message::Stop }).await;
                });
            }
        }
    }

    /// Returns when another shard said the core stops.
    pub async fn stopped(&self) {
        self.stop.notified().await
    }

    /// Sends every other shard the message `make` builds around an answer's
    /// sender, and waits for the answers until `timeout`: the answers, and
    /// the shards that gave none by then (far behind: they still get the
    /// message; or stopping). Call inside the shard's `LocalSet`.
    pub async fn ask_others<T: 'static>(
        &self,
        make: impl Fn(oneshot::Sender<T>) -> Message,
        timeout: std::time::Duration,
    ) -> (Vec<T>, Vec<u32>) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut asked = Vec::new();
        for (j, tx) in self.peers.iter().enumerate() {
            if j as u32 == self.index {
                continue;
            }
            let (answer, rx) = oneshot::channel();
            let envelope = Envelope { from: self.index, message: make(answer) };
            let tx = tx.clone();
            // Sent however long a full inbox takes: the wait for the answer
            // is bounded, the change is not lost.
            tokio::task::spawn_local(async move {
                let _ = tx.send(envelope).await;
            });
            asked.push((j as u32, rx));
        }
        let (mut answers, mut missing) = (Vec::new(), Vec::new());
        for (j, rx) in asked {
            match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(a)) => answers.push(a),
                _ => missing.push(j),
            }
        }
        (answers, missing)
    }

    /// Orders every other shard to start, restart or stop a gateway slot.
    /// `spec` builds each shard's copy.
    pub async fn order_gateway(
        &self,
        slot: (u32, u32),
        timeout_terminate: u32,
        spec: impl Fn() -> Option<GatewaySpec>,
    ) {
        for (j, tx) in self.peers.iter().enumerate() {
            if j as u32 != self.index {
                let order = GatewayOrder { slot, start: spec(), timeout_terminate };
                let _ = tx.send(Envelope { from: self.index, message: Message::Gateway(order) }).await;
            }
        }
    }
}

/// Makes `core` shard `ends.index` of `ends.peers.len()`: admits a
/// pseudo-instance for every other shard and spawns the tasks that carry
/// frames and subscriptions between them. Call on the shard's thread,
/// inside its `LocalSet`, before anything else is admitted.
pub fn attach(core: &Shared, ends: Ends) -> Links {
    let Ends { index, inbox, peers, turns, availability } = ends;
    let count = peers.len() as u32;
    let mut pseudo = vec![0; peers.len()];
    {
        let mut c = core.borrow_mut();
        c.set_shard(ShardIndex { index, count });
        c.registry_mut().journal.on = true;
        c.set_turns(turns);
        c.set_availability(availability);
        for (j, tx) in peers.iter().enumerate() {
            if j as u32 == index {
                continue;
            }
            // Requests from another shard are served here, closest first:
            // by this shard's instances, else sent on to another node.
            let options = Rc::new(ServiceOptions::shard());
            let outbox = Outbox::new(c.limits().max_outbox);
            let id = c.admit_shard(format!("shard {j}"), options, Rc::default(), outbox.clone());
            // Shards 1.. run HTTP gateways only, which take the open files
            // and cached bytes a filesystem service here hands over (the
            // table is the process's, internal/filesystem/stream.rs).
            if j != 0 {
                if let Some(i) = c.instance_mut(&id) {
                    i.take_file_handles();
                }
            }
            pseudo[j] = id;
            c.registry_mut().journal.skip.push(id);
            tokio::task::spawn_local(writer(core.clone(), index, j as u32, id, outbox, tx.clone()));
        }
    }
    let pseudo = Rc::new(pseudo);
    let stop = Rc::new(Notify::new());
    let gateways = thread::Gateways::default();
    let mine =
        Mine { index, pseudo: pseudo.clone(), stop: stop.clone(), gateways: gateways.clone(), peers: peers.clone() };
    tokio::task::spawn_local(receiver(core.clone(), inbox, mine));
    tokio::task::spawn_local(replicate(core.clone(), index, peers.clone()));
    tokio::task::spawn_local(handoff::send_orders(core.clone(), index, peers.clone()));
    let reports = report::Asker::new(index, peers.clone());
    Links { index, peers, stop, pseudo, gateways, reports }
}

/// Passes what this shard routed to shard `to`, batch by batch, in order.
async fn writer(core: Shared, me: u32, to: u32, id: InstanceId, outbox: Rc<Outbox>, tx: mpsc::Sender<Envelope>) {
    let mut batch = Vec::new();
    while outbox.next_batch(&mut batch).await {
        let frames = std::mem::take(&mut batch);
        if tx.send(Envelope { from: me, message: Message::Frames(frames) }).await.is_err() {
            break; // that shard's thread has ended: the core is stopping
        }
    }
    if outbox.overflowed.get() {
        // Shard `to` is more than max_outbox behind: what is in flight there
        // fails now (CRASHED) rather than at its timeout, and this shard
        // routes to it no more.
        let why = format!("shard {to} fell more than core.max_outbox behind");
        tracing::error!("shard {me}: {why}: requests there fail and it is no longer routed to");
        let mut c = core.borrow_mut();
        c.refresh_now();
        c.remove_instance(id, &why);
    }
}

/// What the receiver of a shard needs of it.
struct Mine {
    index: u32,
    pseudo: Rc<Vec<InstanceId>>,
    stop: Rc<Notify>,
    gateways: thread::Gateways,
    /// The other shards' inboxes (answers to their orders).
    peers: Vec<mpsc::Sender<Envelope>>,
}

/// Serves what the other shards send this one.
async fn receiver(core: Shared, mut inbox: mpsc::Receiver<Envelope>, mine: Mine) {
    let Mine { index, pseudo, stop, gateways, peers } = mine;
    let mut sequences = vec![0u64; pseudo.len()];
    while let Some(Envelope { from, message }) = inbox.recv().await {
        let Some(&id) = pseudo.get(from as usize).filter(|id| **id != 0) else { continue };
        match message {
            Message::Frames(frames) => {
                let mut c = core.borrow_mut();
                c.refresh_now();
                take_frames(&mut c, id, &frames);
            }
            Message::Subscriptions { sequence, changes } => {
                let last = &mut sequences[from as usize];
                if sequence != *last + 1 {
                    tracing::error!("shard {from}: subscription change {sequence} follows {last}: one was lost");
                }
                *last = sequence;
                let mut c = core.borrow_mut();
                c.refresh_now();
                if c.has_instance(&id) {
                    apply_changes(&mut c, id, &changes, from);
                    // The message's strings go first, so that a trim
                    // returns their pages too.
                    drop(changes);
                    let now = c.now();
                    c.registry_mut().give_back_memory(now);
                }
            }
            Message::Gateway(order) => gateways.apply(&core, order),
            Message::Stop => stop.notify_one(),
            Message::Report(reply) => {
                core.borrow_mut().refresh_now();
                let r = report::snapshot(&core.borrow(), index, &gateways.service_metrics());
                let _ = reply.send(r);
            }
            Message::Policies { policies, applied } => {
                core.borrow_mut().set_policies(&policies);
                let _ = applied.send(());
            }
            Message::ResetBreakers { policy, pattern, reset } => {
                let n = core.borrow_mut().reset_breakers(policy.as_deref(), pattern.as_deref());
                let _ = reset.send(n);
            }
            Message::Order(order) => handoff::apply(&core, order, peers[from as usize].clone()),
            Message::Gone { id, hung } => core.borrow_mut().gone_elsewhere(id, hung),
        }
    }
    stop.notify_one();
}

/// Subscribes or unsubscribes shard `from`'s pseudo-instance `id` as much
/// as that shard's own subscriptions changed, and keeps which instance there
/// holds what (`mirror`).
fn apply_changes(core: &mut Core, id: InstanceId, changes: &[mirror::Change], from: u32) {
    for change in changes {
        let pattern = change.pattern.as_ref();
        let mut done = 0i32;
        for _ in 0..change.delta.unsigned_abs() {
            let applied = if change.delta > 0 { core.subscribe(id, pattern) } else { core.unsubscribe(id, pattern) };
            if let Err(cumulo_router::RouteError { why, .. }) = applied {
                tracing::warn!("shard {from}: pattern {pattern} not replicated: {why}");
                break;
            }
            done += change.delta.signum();
        }
        if done != 0 {
            let shared: Rc<str> = Rc::from(pattern);
            core.mirror_mut(id).apply(&shared, change.instance, done, change.many);
        }
    }
}

/// Frames from another shard (through its pseudo-instance `from`): REQUESTs
/// to serve here, RESPONSEs to requests this shard sent there. They were
/// encoded by this process, so a frame that does not decode is a bug: it is
/// logged, and the rest of the batch dropped.
pub fn take_frames(core: &mut Core, from: InstanceId, frames: &[u8]) {
    let mut at = 0;
    while let Ok(Some(n)) = cumulo_proto::next_frame_len(&frames[at..], u32::MAX) {
        let frame = &frames[at + cumulo_proto::LEN_PREFIX..at + n];
        at += n;
        match cumulo_proto::decode(frame) {
            Ok(Frame::Request(r)) => cumulo_router::accept_remote(core, from, &r),
            Ok(Frame::Response(r)) => {
                core.ret(from, &r);
            }
            Ok(other) => tracing::error!("shard: unexpected {} between shards ignored", other.type_name()),
            Err(e) => {
                tracing::error!("shard: undecodable frame between shards: {e}");
                break;
            }
        }
    }
}

/// Broadcasts the changes to this shard's own subscriptions to the others
/// (a burst of changes is one message).
async fn replicate(core: Shared, me: u32, peers: Vec<mpsc::Sender<Envelope>>) {
    let changed = core.borrow().registry().journal.changed.clone();
    let mut sequence = 0u64;
    loop {
        changed.notified().await;
        // Let the rest of a burst (a service subscribing its patterns) land.
        tokio::task::yield_now().await;
        let changes: Arc<[mirror::Change]> = {
            let mut c = core.borrow_mut();
            let taken = c.registry_mut().journal.take();
            // Another node's pseudo-instance here stands for its instances
            // there: the other shards give it one copy per subscription.
            let many = |i: InstanceId| c.instance(&i).is_some_and(|x| matches!(x.endpoint(), Endpoint::Remote(_)));
            taken
                .into_iter()
                .map(|(p, instance, delta)| mirror::Change {
                    pattern: Box::from(&*p),
                    instance,
                    delta,
                    many: many(instance),
                })
                .collect()
        };
        if changes.is_empty() {
            continue;
        }
        sequence += 1;
        for (j, tx) in peers.iter().enumerate() {
            if j as u32 == me {
                continue;
            }
            let message = Message::Subscriptions { sequence, changes: changes.clone() };
            if tx.send(Envelope { from: me, message }).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
