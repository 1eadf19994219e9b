//! The core's shared state: instances, registry, requests in flight and their
//! timers. It lives on the core's single event-loop thread (`Rc<RefCell<_>>`):
//! routing a request touches no lock and no atomic, like the minimal relay it
//! is measured against. The routing itself is in `routing.rs`; this file
//! holds the state and the lifecycle of instances.

use crate::held::{Held, Holds};
use crate::instance::{Endpoint, Identity, Instance, Origin, OwnedRequest, ServiceId};
use crate::metrics::{ServiceMetrics, Stats};
use crate::registry::{InstanceId, Registry};
use crate::trust::{Clients, Via};
use crate::RouteError;
use ahash::AHashMap;
use cumulo_config::{Anonymous, ServiceOptions, MAX_WINDOW};
use cumulo_proto::{Status, TransId, TransIdGen};
use cumulo_sys::Throttle;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub type Shared = Rc<RefCell<Core>>;

/// Keep-alive rounds in a row an instance that serves something may stay
/// silent (outside every request's timeout) before it is closed as hung:
/// one round to answer the PING, two more for a slow scheduler.
pub const HUNG_AFTER_ROUNDS: u32 = 3;

/// Instance ids at the top of the range, kept for the stamps of the
/// trans_ids shards originate (`Core::set_shard`).
const MAX_THREADS_STAMPS: u32 = cumulo_config::MAX_THREADS + 1;

/// Settings the routing code needs on every request.
#[derive(Debug, Clone)]
pub struct Limits {
    pub node_id: u32,
    pub max_frame: u32,
    pub max_outbox: usize,
    /// Requests waiting for a subscriber, core-wide, at most.
    pub max_parked: usize,
    /// Bytes of queued and parked requests, core-wide and per sender, at most.
    pub max_queued_bytes: usize,
    pub max_sender_queued_bytes: usize,
    /// Longest name and pattern, most wildcards per pattern.
    pub names: cumulo_pattern::NameLimits,
    /// Subscriptions one instance may hold, at most.
    pub max_subscriptions: usize,
    /// Time a new connection has to send HELLO.
    pub hello_timeout: Duration,
    pub keepalive: Duration,
    pub max_connections: u32,
    pub allow_unmanaged: bool,
    /// What an instance without a token may do, per listener.
    pub tcp_anonymous: cumulo_config::Anonymous,
    pub unix_anonymous: cumulo_config::Anonymous,
    /// `core.spread_instances`: managed service connections are handed to
    /// the shards (with more than one).
    pub spread_instances: bool,
}

/// A request in flight: accepted from `sender`, not yet answered.
#[derive(Debug)]
pub struct InFlight {
    pub sender: InstanceId,
    /// The instance it is queued at or delivered to; 0 while parked.
    pub dest: InstanceId,
    pub deadline: Instant,
    /// When the core accepted it: the start of its measured duration.
    pub accepted: Instant,
    pub timeout_ms: u32,
    /// REQUEST flags to keep when the request is forwarded.
    pub flags: u8,
    /// Where it waits, if it is queued or parked.
    pub held: Held,
    /// Parked for the instance of the configured service that covers its
    /// name, which is (re)starting (`availability`): if none comes within
    /// its timeout, it is UNAVAILABLE rather than TIMEOUT.
    pub for_restart: bool,
    /// Parked for a moment only (`Verdict::Recheck`): its timer entry at the
    /// end of that moment routes it again rather than expiring it.
    pub recheck: bool,
    /// Its policy's hold on it, when one follows its outcome (`resilience`).
    pub track: crate::resilience::Track,
}

/// A managed process as the core knows it (the supervisor owns the OS side).
#[derive(Debug)]
pub struct ProcessSlot {
    pub service: ServiceId,
    pub prefix: Rc<str>,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
    pub options: Rc<ServiceOptions>,
    pub metrics: Rc<ServiceMetrics>,
    /// Being stopped: its threads may not connect any more.
    pub retiring: bool,
    /// thread_index → instance, while connected.
    pub threads: Vec<Option<InstanceId>>,
    /// thread_index → the shard that serves its instance (`core.threads` >
    /// 1: instances are handed to other shards after their HELLO).
    pub shards: Vec<u32>,
    /// Woken when every thread has connected (init done).
    pub ready: Rc<Notify>,
    pub pid: Option<u32>,
}

pub struct Core {
    pub(crate) limits: Limits,
    pub(crate) unmanaged_options: Rc<ServiceOptions>,
    pub(crate) unmanaged_metrics: Rc<ServiceMetrics>,
    /// The `[[client]]`s of the config, admitted by token.
    clients: Rc<Clients>,
    pub(crate) instances: AHashMap<InstanceId, Instance>,
    next_instance: InstanceId,
    pub(crate) registry: Registry,
    pub(crate) inflight: AHashMap<TransId, InFlight>,
    /// When the requests in flight fall due (lazy: see `timeouts.rs`).
    pub(crate) timers: crate::timeouts::Timeouts,
    /// Requests waiting for a subscriber (WAIT_FOR_SERVICE), by arrival.
    pub(crate) parked: crate::held::Parked,
    /// What queued and parked requests weigh, per sender and in total.
    pub(crate) holds: Holds,
    /// trans_ids of requests the core originates (multicast copies).
    pub(crate) ids: TransIdGen,
    pub(crate) processes: AHashMap<Rc<str>, ProcessSlot>,
    pub(crate) shutting_down: bool,
    /// Connection tasks not finished yet (their last bytes may still be
    /// leaving): a shutdown waits for them.
    pub(crate) connection_tasks: usize,
    pub(crate) stats: Stats,
    /// Whether this node is one of a cloud (`[cluster]` is configured):
    /// other nodes may then be pseudo-instances here. Who they are is the
    /// cluster's (the node's `cluster::Membership`).
    pub(crate) clustered: bool,
    /// The time, read once per batch of work (a read of frames, a timer, an
    /// internal call) instead of once per frame: clock reads were a tenth of
    /// the routing profile. Every entry into the core that may route or
    /// answer reads it first (`refresh_now`): a deadline's time left is
    /// computed from it.
    pub(crate) now: Instant,
    /// Connections accepted that have not finished their handshake: they
    /// count against max_connections too.
    pub(crate) handshaking: usize,
    /// Warnings for connections refused over max_connections, and for
    /// those refused in the handshake (garbage, bad version, too large,
    /// no HELLO in time): a flood of either is one line per interval.
    pub(crate) limit_refusals: Throttle,
    pub(crate) handshake_refusals: Throttle,
    /// When the previous keep-alive round ran.
    last_keepalive: Instant,
    /// What services built on the core show operators (queues, ...): the
    /// admin API lists them by kind, `/metrics` adds their samples.
    pub(crate) reports: cumulo_service::Reports,
    /// This shard's index and the number of shards (`core.threads`):
    /// instance ids are given in steps of `count` from `index + 1`, so that
    /// ids (and the trans_ids stamped with them) never meet across shards.
    pub(crate) shard: ShardIndex,
    /// Pseudo-instances (other nodes, other shards): they hold no
    /// connection and do not count against max_connections.
    pub(crate) pseudo_instances: usize,
    /// Service connections served by another shard than the one that
    /// admitted them (`shards::handoff`); empty with one shard.
    pub(crate) handoff: crate::shards::handoff::Handoff,
    /// Per other shard's pseudo-instance: which instance there subscribes
    /// what (`shards::mirror`), for multicast copies; empty with one shard.
    pub(crate) mirrors: AHashMap<InstanceId, crate::shards::mirror::Mirror>,
    /// The round-robin cursors shared with the other shards
    /// (`shards::turns`); None with one shard.
    pub(crate) turns: Option<crate::shards::turns::Turns>,
    /// The configured services, shared by the shards: what a request for a
    /// name nothing subscribes gets (`availability`).
    pub(crate) availability: crate::availability::Availability,
    /// Retries, breakers and outlier ejection (`[[policy]]`); None with no
    /// policy: every path then pays one branch for them.
    pub(crate) resilience: Option<Box<crate::resilience::Resilience>>,
    /// Health probes of instances (`[service.health]`); None until an
    /// instance with probes is seen.
    pub(crate) health: Option<Box<crate::health::Health>>,
    /// Spans of the requests routed here (`[tracing]`); None when off:
    /// every hook then pays one branch.
    pub(crate) spans: Option<Box<crate::call_spans::CallSpans>>,
}

/// Where a core stands among the shards of one process.
#[derive(Debug, Clone, Copy)]
pub struct ShardIndex {
    pub index: u32,
    pub count: u32,
}

impl ShardIndex {
    pub const ALONE: ShardIndex = ShardIndex { index: 0, count: 1 };
}

/// What a connection learns when its HELLO is accepted.
pub struct Accepted {
    pub id: InstanceId,
    /// The shard that serves it: this one, or another one to hand it to
    /// (then it is not in `instances` here; `label` and `origin` go with it).
    pub shard: u32,
    pub label: String,
    pub origin: Option<Origin>,
    pub prefix: Rc<str>,
    pub options: Rc<ServiceOptions>,
    pub window: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
}

impl Core {
    pub fn new(limits: Limits, unmanaged_options: ServiceOptions) -> Core {
        let node_id = limits.node_id;
        Core {
            limits,
            unmanaged_options: Rc::new(unmanaged_options),
            unmanaged_metrics: Rc::default(),
            clients: Rc::default(),
            instances: AHashMap::new(),
            next_instance: 1,
            registry: Registry::default(),
            inflight: AHashMap::new(),
            timers: Default::default(),
            parked: Default::default(),
            holds: Holds::default(),
            ids: TransIdGen::new(node_id, 0),
            processes: AHashMap::new(),
            shutting_down: false,
            connection_tasks: 0,
            stats: Stats::default(),
            clustered: false,
            now: Instant::now(),
            handshaking: 0,
            limit_refusals: Throttle::default(),
            handshake_refusals: Throttle::default(),
            last_keepalive: Instant::now(),
            reports: cumulo_service::Reports::default(),
            shard: ShardIndex::ALONE,
            pseudo_instances: 0,
            handoff: Default::default(),
            mirrors: AHashMap::new(),
            turns: None,
            availability: Default::default(),
            resilience: None,
            health: None,
            spans: None,
        }
    }

    /// Reads the clock into `now`. The entry points that may reroute or
    /// answer outside a read of frames (an instance removed, instances
    /// retired by the supervisor or the admin API, a timer, a shutdown) call
    /// it themselves: a stale `now` would overstate a rerouted request's
    /// time left.
    pub fn refresh_now(&mut self) -> Instant {
        self.now = Instant::now();
        self.now
    }

    /// Records the spans of the requests routed here (`[tracing]` on);
    /// `start_traces`: a request with no trace context starts one.
    pub fn set_tracing(&mut self, recorder: cumulo_trace::Recorder, start_traces: bool) {
        let node = self.limits.node_id;
        self.spans = Some(Box::new(crate::call_spans::CallSpans::new(recorder, start_traces, node)));
    }

    /// Where spans are recorded, when `[tracing]` is on.
    pub fn tracer(&self) -> Option<cumulo_trace::Recorder> {
        self.spans.as_deref().map(|s| s.recorder().clone())
    }

    /// Makes this core shard `index` of `count` (before anything is admitted).
    pub fn set_shard(&mut self, shard: ShardIndex) {
        self.shard = shard;
        self.next_instance = shard.index + 1;
        // The trans_ids this shard originates (multicast copies) are stamped
        // with an instance id no instance gets: 0 on shard 0 (as with one
        // thread), u32::MAX - index on the others.
        let stamp = if shard.index == 0 { 0 } else { u32::MAX - shard.index };
        self.ids = TransIdGen::new(self.limits.node_id, stamp);
    }

    fn new_id(&mut self) -> InstanceId {
        let (first, step) = (self.shard.index + 1, self.shard.count);
        // Leave the top ids to the shards' own stamps (set_shard).
        let last = u32::MAX - MAX_THREADS_STAMPS;
        loop {
            let id = self.next_instance;
            self.next_instance = match self.next_instance.checked_add(step) {
                Some(n) if n <= last => n,
                _ => first,
            };
            if id != 0 && !self.instances.contains_key(&id) && !self.handoff.shard_of.contains_key(&id) {
                return id;
            }
        }
    }

    /// Connections and internal instances: what max_connections bounds.
    pub fn connections(&self) -> usize {
        self.instances.len() - self.pseudo_instances + self.handoff.shard_of.len()
    }

    /// Admits a connection that sent HELLO: a managed process's thread (by
    /// token) or an unmanaged client (by prefix).
    pub fn admit(
        &mut self,
        token: &str,
        prefix: &str,
        thread_index: u32,
        window: u32,
        endpoint: Endpoint,
    ) -> Result<Accepted, RouteError> {
        let hello = cumulo_proto::Hello { version: cumulo_proto::VERSION, window, thread_index, token, prefix };
        self.admit_on_a_shard(&hello, endpoint, false, Via::Unix)
    }

    /// As `admit`; with `movable` and more than one shard, the instance may
    /// be given to another shard (`Accepted::shard`): it is then recorded as
    /// served there (`handoff.shard_of`, the slot's `shards`) and the caller
    /// hands its connection over. `via`: the listener it came through.
    pub fn admit_on_a_shard(
        &mut self,
        hello: &cumulo_proto::Hello<'_>,
        endpoint: Endpoint,
        movable: bool,
        via: Via,
    ) -> Result<Accepted, RouteError> {
        let (token, prefix, thread_index, window) = (hello.token, hello.prefix, hello.thread_index, hello.window);
        if self.shutting_down {
            return Err(RouteError::new(Status::ShuttingDown, "the core is shutting down"));
        }
        if self.connections() as u32 >= self.limits.max_connections {
            return Err(RouteError::new(
                Status::InvalidArgument,
                format!("connection limit reached ({} instances, core.max_connections)", self.limits.max_connections),
            ));
        }
        let clients = self.clients.clone();
        let client = match token.is_empty() || self.processes.contains_key(token) {
            true => None,
            false => match clients.find(token) {
                Some(c) => Some(c),
                None => {
                    self.stats.unauthorized += 1;
                    return Err(RouteError::new(
                        Status::Unauthorized,
                        "unknown token: neither a process this core started nor a [[client]] of its config",
                    ));
                }
            },
        };
        let mut outside_services = false;
        if client.is_none() && token.is_empty() {
            let rule = match via {
                Via::Tcp => (self.limits.tcp_anonymous, "core.tcp_anonymous"),
                Via::Unix => (self.limits.unix_anonymous, "core.unix_anonymous"),
            };
            let refused = match (self.limits.allow_unmanaged, rule.0) {
                (false, _) => Some("unmanaged instances are refused (core.allow_unmanaged = false)".to_string()),
                (true, Anonymous::Refuse) => Some(format!(
                    "an instance without a token is refused here ({} = \"refuse\"): present a [[client]] token",
                    rule.1
                )),
                (true, rule) => {
                    outside_services = rule == Anonymous::OutsideServices;
                    None
                }
            };
            if let Some(why) = refused {
                self.stats.unauthorized += 1;
                return Err(RouteError::new(Status::Unauthorized, why));
            }
        }
        if let Some(c) = client.filter(|c| !c.may_claim(prefix)) {
            self.stats.unauthorized += 1;
            let why =
                format!("client '{}' may not claim the prefix '{prefix}' (its prefixes: {})", c.name, c.prefixes());
            return Err(RouteError::new(Status::Unauthorized, why));
        }
        let id = self.new_id();
        let (prefix, options, metrics, origin, label, pi, pc, tc, shard) = if token.is_empty() || client.is_some() {
            if !prefix.starts_with('/') {
                return Err(RouteError::new(
                    Status::InvalidArgument,
                    format!("unmanaged prefix '{prefix}' must start with '/'"),
                ));
            }
            if let Err(why) = cumulo_pattern::validate(prefix) {
                return Err(RouteError::new(Status::InvalidArgument, why));
            }
            let label = match client {
                Some(c) => format!("client {} instance {id} ({prefix})", c.name),
                None => format!("unmanaged instance {id} ({prefix})"),
            };
            // Unmanaged instances (tools, tests, load generators) stay on
            // the shard that admitted them: their sender allowances, the
            // core's byte limits and the "unmanaged" metrics stay one count,
            // and a sender that goes away takes what it has waiting with it
            // (`held`), which another shard could not tell apart from the
            // rest of this shard's requests.
            let o = client.map_or_else(|| self.unmanaged_options.clone(), |c| c.options.clone());
            let m = self.unmanaged_metrics.clone();
            (Rc::from(prefix), o, m, None, label, 0, 1, 1, self.shard.index)
        } else {
            let Some(slot) = self.processes.get_mut(token) else {
                return Err(RouteError::new(
                    Status::Unauthorized,
                    "unknown token: this process was not started by this core",
                ));
            };
            if slot.retiring {
                return Err(RouteError::new(
                    Status::ShuttingDown,
                    format!("{} process {} is being stopped", slot.prefix, slot.process_index),
                ));
            }
            let Some(thread) = slot.threads.get_mut(thread_index as usize) else {
                return Err(RouteError::new(
                    Status::InvalidArgument,
                    format!("thread_index {thread_index} out of range (count_thread = {})", slot.thread_count),
                ));
            };
            if thread.is_some() {
                return Err(RouteError::new(
                    Status::InvalidArgument,
                    format!("thread_index {thread_index} is already connected"),
                ));
            }
            *thread = Some(id);
            let shard = match movable && self.shard.count > 1 && self.limits.spread_instances {
                true => {
                    crate::shards::handoff::pick(self.shard.count, slot.process_index, slot.thread_count, thread_index)
                }
                false => self.shard.index,
            };
            if let Some(s) = slot.shards.get_mut(thread_index as usize) {
                *s = shard;
            }
            if slot.threads.iter().all(Option::is_some) {
                slot.ready.notify_one();
            }
            let label = format!("{} process {} thread {}", slot.prefix, slot.process_index, thread_index);
            let origin = Origin { service: slot.service, process_index: slot.process_index, token: Rc::from(token) };
            let (o, m) = (slot.options.clone(), slot.metrics.clone());
            let (pi, pc, tc) = (slot.process_index, slot.process_count, slot.thread_count);
            (slot.prefix.clone(), o, m, Some(origin), label, pi, pc, tc, shard)
        };
        let window = window.clamp(1, options.max_window.min(MAX_WINDOW));
        let accepted = |label: String, origin: Option<Origin>| Accepted {
            id,
            shard,
            label,
            origin,
            prefix: prefix.clone(),
            options: options.clone(),
            window,
            process_index: pi,
            process_count: pc,
            thread_count: tc,
        };
        if shard != self.shard.index {
            // Served there; the id stays reserved here until it is gone.
            let service = origin.as_ref().map_or(0, |o| o.service);
            self.handoff.shard_of.insert(id, (shard, service));
            return Ok(accepted(label, origin));
        }
        tracing::debug!(instance = id, "{label} connected (window {window})");
        let a = accepted(label.clone(), origin.clone());
        let who = Identity {
            prefix: prefix.clone(),
            label,
            origin,
            options: options.clone(),
            metrics,
            window,
            outside_services,
        };
        self.instances.insert(id, Instance::new(id, who, endpoint));
        Ok(a)
    }

    /// Registers an internal service instance (it needs no handshake).
    pub fn admit_internal(
        &mut self,
        prefix: &str,
        options: Rc<ServiceOptions>,
        metrics: Rc<ServiceMetrics>,
        inbox: Rc<crate::instance::InternalInbox>,
        service: ServiceId,
        process_index: u32,
    ) -> Result<InstanceId, RouteError> {
        if self.shutting_down {
            return Err(RouteError::new(Status::ShuttingDown, "the core is shutting down"));
        }
        let id = self.new_id();
        let label = format!("{prefix} internal instance {process_index}");
        tracing::debug!(instance = id, "{label} started");
        let origin = Some(Origin { service, process_index, token: Rc::from("") });
        let window = options.max_window;
        let who =
            Identity { prefix: Rc::from(prefix), label, origin, options, metrics, window, outside_services: false };
        self.instances.insert(id, Instance::new(id, who, Endpoint::Internal(inbox)));
        Ok(id)
    }

    /// Registers another node of the cloud as a pseudo-instance (src/cluster):
    /// its outbox is published over NATS instead of written to a socket.
    pub fn admit_remote(
        &mut self,
        label: String,
        options: Rc<ServiceOptions>,
        metrics: Rc<ServiceMetrics>,
        outbox: Rc<crate::instance::Outbox>,
    ) -> InstanceId {
        self.admit_pseudo(label, options, metrics, Endpoint::Remote(outbox))
    }

    /// Registers another shard of this core as a pseudo-instance
    /// (src/shards): its outbox is passed to that shard's thread.
    pub fn admit_shard(
        &mut self,
        label: String,
        options: Rc<ServiceOptions>,
        metrics: Rc<ServiceMetrics>,
        outbox: Rc<crate::instance::Outbox>,
    ) -> InstanceId {
        self.admit_pseudo(label, options, metrics, Endpoint::Shard(outbox))
    }

    fn admit_pseudo(
        &mut self,
        label: String,
        options: Rc<ServiceOptions>,
        metrics: Rc<ServiceMetrics>,
        endpoint: Endpoint,
    ) -> InstanceId {
        let id = self.new_id();
        let window = options.max_window;
        let who =
            Identity { prefix: Rc::from(""), label, origin: None, window, options, metrics, outside_services: false };
        self.instances.insert(id, Instance::new(id, who, endpoint));
        self.pseudo_instances += 1;
        id
    }

    /// An instance is gone (connection closed, process died): its
    /// subscriptions end, requests it was handling fail with CRASHED at once,
    /// and requests still queued for it go to another instance.
    pub fn remove_instance(&mut self, id: InstanceId, why: &str) {
        if !self.instances.contains_key(&id) {
            return;
        }
        self.refresh_now();
        self.drop_held_of(id);
        let Some(mut inst) = self.instances.remove(&id) else { return };
        if inst.endpoint.is_pseudo() {
            self.pseudo_instances -= 1;
            self.mirrors.remove(&id);
        }
        for p in inst.subscriptions.iter() {
            self.registry.unsubscribe(p, id);
        }
        if !inst.subscriptions.is_empty() {
            self.note_serving(&inst, false);
        }
        if let Some(o) = &inst.origin {
            if let Some(slot) = self.processes.get_mut(&o.token) {
                for t in slot.threads.iter_mut().filter(|t| **t == Some(id)) {
                    *t = None;
                }
            }
        }
        let crashed = format!("{} went away while handling the request ({why})", inst.label);
        for tid in inst.delivered.drain(..) {
            if let Some(f) = self.inflight.remove(&tid) {
                if f.sender == crate::health::PROBE_SENDER && self.probe_answered(&tid, Some(Status::Crashed)) {
                    continue;
                }
                self.stats.crashed += 1;
                inst.metrics.failed(Status::Crashed);
                if !(f.track.is_tracked() && self.settle(tid, &f, Status::Crashed, id)) {
                    self.respond(f.sender, &tid, Status::Crashed, b"", crashed.as_bytes());
                }
            }
        }
        let queued: Vec<OwnedRequest> = inst.queue.drain().collect();
        for q in queued {
            self.holds.release(&q);
            if self.inflight.contains_key(&q.trans_id) {
                self.reroute(q);
            }
        }
        self.forget_instance(id);
        self.forget_probed(id);
        tracing::debug!(instance = id, "{} disconnected: {why}", inst.label);
        drop(inst); // its subscriptions' strings go with it, before a trim
        self.registry.give_back_memory(self.now);
    }

    /// Sends an answer to whoever sent the request, if it is still there.
    pub fn respond(&self, sender: InstanceId, tid: &TransId, status: Status, info: &[u8], body: &[u8]) {
        if let Some(spans) = self.spans.as_deref().filter(|s| s.any_open()) {
            spans.end(tid, status, body, self.now);
        }
        let Some(inst) = self.instances.get(&sender) else { return };
        match &inst.endpoint {
            Endpoint::Socket(out) | Endpoint::Remote(out) | Endpoint::Shard(out) => {
                out.push(|b| crate::frames::response(b, *tid, status, info, body));
            }
            Endpoint::Internal(inbox) => inbox.deliver(crate::instance::Response {
                trans_id: *tid,
                status,
                response_info: info.to_vec(),
                response: body.to_vec(),
            }),
        }
    }

    /// Arms the timeout of a request. Entries its answer leaves behind are
    /// swept out here once they outnumber what the requests in flight need.
    pub fn arm_timer(&mut self, tid: TransId, deadline: Instant) {
        if self.timers.needs_sweep(self.inflight.len()) {
            let inflight = &self.inflight;
            let retries = self.resilience.as_deref();
            self.timers.retain(|at, tid| {
                inflight.get(tid).is_some_and(|f| f.deadline == at || f.recheck)
                    || retries.is_some_and(|r| r.retry_due(tid, at))
            });
            if let Some(spans) = self.spans.as_deref() {
                spans.sweep(&self.inflight);
            }
        }
        self.timers.arm(tid, deadline);
    }

    /// Expires the requests whose deadline has passed, at most `batch` of
    /// them (the timer task yields between batches); true if more are due.
    pub fn expire_due(&mut self, batch: usize) -> bool {
        self.refresh_now();
        // The timer task's clock: the same as `now` in the daemon; in tests
        // and fuzz targets on a paused clock, the one their sleeps advance.
        let now = tokio::time::Instant::now().into_std();
        for _ in 0..batch {
            let Some((at, tid)) = self.timers.pop_due(now) else { return false };
            // An entry outlives its request's answer, and a forward arms a
            // new, earlier one: only a request still in flight whose own
            // deadline has passed expires.
            let f = self.inflight.get(&tid);
            if f.is_some_and(|f| f.deadline <= now) {
                self.expire(tid);
            } else if self.resilience.as_deref().is_some_and(|r| r.retry_due(&tid, at)) {
                self.fire_retry(tid);
            } else if f.is_some_and(|f| f.recheck) {
                self.recheck(tid);
            }
        }
        true
    }

    /// A request's timer fired: its sender gets TIMEOUT now. A late answer
    /// will be dropped.
    /// Called from `expire_due`, which has read the clock for the batch.
    fn expire(&mut self, tid: TransId) {
        let Some(f) = self.inflight.remove(&tid) else { return };
        // A timeout is counted once, by the shard the request entered the
        // core at, which answers its sender: here when another shard's
        // request times out, that shard counts it (by its own timer, or as it
        // passes on the TIMEOUT sent from here: `ret`).
        let from_shard = self.instances.get(&f.sender).is_some_and(|i| matches!(i.endpoint, Endpoint::Shard(_)));
        // Out of its queue or the parked ones now: a dead request must not
        // hold a place under the limits, nor its payload's memory.
        self.unhold(f.held, f.dest);
        if f.sender == crate::health::PROBE_SENDER && self.probe_answered(&tid, None) {
            return;
        }
        if let Some(r) = self.resilience.as_deref_mut() {
            if f.track.is_tracked() {
                let dest = f.dest;
                if self.settle(tid, &f, Status::Timeout, dest) {
                    if let Some(i) = self.instances.get(&dest) {
                        i.metrics.failed(Status::Timeout);
                    }
                    return;
                }
            } else {
                r.forget(&tid);
            }
        }
        if f.for_restart && f.dest == 0 {
            // Its service is still (re)starting: try again later, not "slow".
            self.stats.unavailable += 1;
            let msg = format!(
                "no instance of the service that covers the name came back within {} ms (it is starting or restarting)",
                f.timeout_ms
            );
            return self.respond(f.sender, &tid, Status::Unavailable, b"", msg.as_bytes());
        }
        if !from_shard {
            self.stats.timeouts += 1;
        }
        if let Some(i) = self.instances.get(&f.dest) {
            i.metrics.failed(Status::Timeout);
        }
        let where_ = match self.instances.get_mut(&f.dest) {
            Some(i) if i.delivered.contains(&tid) => format!("being handled by {}", i.label),
            Some(i) => format!("queued for {}", i.label),
            None if f.dest == 0 => "waiting for a service to subscribe".to_string(),
            None => "its instance is gone".to_string(),
        };
        let msg = format!("no response within {} ms (request was {where_})", f.timeout_ms);
        self.respond(f.sender, &tid, Status::Timeout, b"", msg.as_bytes());
    }

    /// Keep-alive round: ping every socket instance; close those that have
    /// been silent for `HUNG_AFTER_ROUNDS` rounds in a row while not inside
    /// any request's timeout. Returns the pids of managed processes found
    /// hung, to be killed.
    ///
    /// Silence is judged by what the core could read, not by its clock: a
    /// round counts as silent only if nothing was read from the instance
    /// since the previous round and nothing waits unread in its socket. After
    /// the core's event loop was stalled (a long pause, a stopped process)
    /// the next round finds the instances' answers waiting, not missing.
    pub fn keepalive_tick(&mut self, now: Instant, nonce: u64) -> Vec<u32> {
        self.now = now;
        let previous = std::mem::replace(&mut self.last_keepalive, now);
        self.registry.give_back_memory(now);
        self.sweep_resilience(now);
        let mut hung = Vec::new();
        for inst in self.instances.values_mut() {
            let Endpoint::Socket(out) = &inst.endpoint else { continue };
            out.push(|b| crate::frames::ping(b, nonce));
            let heard = inst.last_rx >= previous || inst.rx_fd.is_some_and(|fd| cumulo_sys::bytes_waiting(fd) > 0);
            inst.silent_rounds = if heard { 0 } else { inst.silent_rounds.saturating_add(1) };
            // Only an instance that serves something can be hung: a pure
            // sender (a tool idle between calls) is left alone.
            let serves = !inst.subscriptions.is_empty() || !inst.delivered.is_empty();
            let silent = serves && inst.silent_rounds >= HUNG_AFTER_ROUNDS;
            let busy_in_time = inst.delivered.iter().any(|t| self.inflight.get(t).is_some_and(|f| f.deadline > now));
            if silent && !busy_in_time {
                hung.push(inst.id);
            }
        }
        let mut pids = Vec::new();
        for id in &hung {
            if let Some(inst) = self.instances.get(id) {
                let silent_for = self.now.saturating_duration_since(inst.last_rx);
                tracing::warn!(
                    instance = id,
                    "{} sent nothing for {HUNG_AFTER_ROUNDS} keep-alive rounds ({silent_for:?}): closing it as hung",
                    inst.label
                );
                if let Endpoint::Socket(out) = &inst.endpoint {
                    out.close();
                }
                let pid = inst.origin.as_ref().and_then(|o| self.processes.get(&o.token)).and_then(|s| s.pid);
                pids.extend(pid);
            }
        }
        pids
    }

    /// Stops taking requests: queued and parked ones fail with SHUTTING_DOWN,
    /// every instance gets TERMINATE.
    pub fn begin_shutdown(&mut self, terminate_ms: u32) {
        self.refresh_now();
        self.shutting_down = true;
        let mut queued: Vec<(OwnedRequest, Option<Rc<ServiceMetrics>>)> =
            self.parked.take_all().into_iter().map(|q| (q, None)).collect();
        for inst in self.instances.values_mut() {
            let m = inst.metrics.clone();
            queued.extend(inst.queue.drain().map(|q| (q, Some(m.clone()))));
        }
        self.holds.clear();
        self.drop_waiting_retries();
        for (q, metrics) in queued {
            if let Some(f) = self.inflight.remove(&q.trans_id) {
                metrics.inspect(|m| m.failed(Status::ShuttingDown));
                self.respond(f.sender, &q.trans_id, Status::ShuttingDown, b"", b"the core is shutting down");
            }
        }
        for inst in self.instances.values() {
            if let Endpoint::Socket(out) = &inst.endpoint {
                out.push(|b| crate::frames::terminate(b, terminate_ms));
            }
        }
    }

    /// The end of a shutdown: requests still in flight (their instance did
    /// not answer within the terminate timeout) fail with SHUTTING_DOWN, and
    /// every connection is closed once its outbox is written.
    pub fn finish_shutdown(&mut self) {
        self.refresh_now();
        let left: Vec<(TransId, InFlight)> = self.inflight.drain().collect();
        for (tid, f) in left {
            if let Some(i) = self.instances.get(&f.dest) {
                i.metrics.failed(Status::ShuttingDown);
            }
            let msg = "the core stopped before the request was answered (terminate timeout)";
            self.respond(f.sender, &tid, Status::ShuttingDown, b"", msg.as_bytes());
        }
        for inst in self.instances.values() {
            if let Endpoint::Socket(out) = &inst.endpoint {
                out.close();
            }
        }
    }

    /// Socket connections still open or still writing their last bytes.
    pub fn open_connections(&self) -> usize {
        self.connection_tasks
    }

    /// Stops routing to these instances and tells them to TERMINATE: their
    /// subscriptions end at once; what was queued for them goes to another
    /// instance of the same pattern if there is one, else fails with
    /// SHUTTING_DOWN; what they hold they may still answer. Used when a
    /// process or a whole service is stopped while the core runs.
    pub fn retire_instances(&mut self, ids: &[InstanceId], terminate_ms: u32, why: &str) {
        self.refresh_now();
        if !self.handoff.shard_of.is_empty() {
            self.retire_elsewhere(ids, terminate_ms, why);
        }
        let mut queued = Vec::new();
        for id in ids {
            let Some(inst) = self.instances.get_mut(id) else { continue };
            if inst.retiring {
                continue;
            }
            inst.retiring = true;
            let taken = inst.subscriptions.take();
            if !taken.is_empty() {
                if let Some(o) = &inst.origin {
                    self.availability.serving_changed(o.service, false);
                }
            }
            for p in taken {
                self.registry.unsubscribe(&p, *id);
            }
            let m = inst.metrics.clone();
            queued.extend(inst.queue.drain().map(|q| (q, m.clone())));
            if let Endpoint::Socket(out) = &inst.endpoint {
                if !self.shutting_down {
                    out.push(|b| crate::frames::terminate(b, terminate_ms));
                }
            }
        }
        for (q, metrics) in queued {
            self.holds.release(&q);
            if !self.inflight.contains_key(&q.trans_id) {
                continue;
            }
            if self.registry.lookup(&q.name).is_some() {
                self.reroute(q);
            } else if let Some(f) = self.inflight.remove(&q.trans_id) {
                metrics.failed(Status::ShuttingDown);
                self.respond(f.sender, &q.trans_id, Status::ShuttingDown, b"", why.as_bytes());
            }
        }
    }

    /// Orders the shards that serve any of `ids` to retire them.
    fn retire_elsewhere(&mut self, ids: &[InstanceId], terminate_ms: u32, why: &str) {
        let mut by_shard: std::collections::BTreeMap<u32, Vec<InstanceId>> = Default::default();
        for id in ids {
            if let Some(&(s, _)) = self.handoff.shard_of.get(id) {
                by_shard.entry(s).or_default().push(*id);
            }
        }
        for (s, ids) in by_shard {
            let why = why.to_string();
            self.handoff.order(s, crate::shards::handoff::Order::Retire { ids, terminate_ms, why });
        }
    }

    /// The instances of a managed process, by its token.
    pub fn process_instances(&self, token: &str) -> Vec<InstanceId> {
        self.processes.get(token).map(|s| s.threads.iter().flatten().copied().collect()).unwrap_or_default()
    }

    /// The shard serving each connected instance of a managed process.
    pub fn process_shards(&self, token: &str) -> Vec<u32> {
        let Some(s) = self.processes.get(token) else { return Vec::new() };
        s.threads.iter().zip(&s.shards).filter(|(t, _)| t.is_some()).map(|(_, shard)| *shard).collect()
    }

    /// Stops a managed process's instances from taking requests and refuses
    /// its threads that have not connected yet.
    pub fn retire_process(&mut self, token: &str, terminate_ms: u32, why: &str) {
        if let Some(slot) = self.processes.get_mut(token) {
            slot.retiring = true;
        }
        let ids = self.process_instances(token);
        self.retire_instances(&ids, terminate_ms, why);
    }

    /// New options for a running service: its instances and processes use
    /// them from the next request on.
    pub fn set_service_options(&mut self, service: ServiceId, options: &Rc<ServiceOptions>) {
        for inst in self.instances.values_mut() {
            if inst.origin.as_ref().is_some_and(|o| o.service == service) {
                inst.options = options.clone();
            }
        }
        for slot in self.processes.values_mut().filter(|s| s.service == service) {
            slot.options = options.clone();
        }
        // The instances other shards serve were given a copy.
        if self.shard.index == 0 {
            for s in 1..self.shard.count {
                let options = ServiceOptions::clone(options);
                self.handoff.order(s, crate::shards::handoff::Order::Options { service, options });
            }
        }
    }
}

/// What the node (listener, supervisor, cluster, shards, admin API) reads
/// and changes of the router's state: the fields are the router's own.
impl Core {
    /// The configured services' table, shared with the other shards.
    pub fn availability(&self) -> &crate::availability::Availability {
        &self.availability
    }

    /// Makes this core share `availability` (every shard one table).
    pub fn set_availability(&mut self, availability: crate::availability::Availability) {
        self.availability = availability;
    }

    /// An instance of a configured service starts (`true`) or stops
    /// (`false`) holding subscriptions.
    pub(crate) fn note_serving(&self, inst: &Instance, serving: bool) {
        if let Some(o) = &inst.origin {
            self.availability.serving_changed(o.service, serving);
        }
    }

    #[inline]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Sets the time read once for a batch of work (see `now`).
    #[inline]
    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    #[inline]
    pub fn shard(&self) -> ShardIndex {
        self.shard
    }

    #[inline]
    pub fn instance(&self, id: &InstanceId) -> Option<&Instance> {
        self.instances.get(id)
    }

    #[inline]
    pub fn instance_mut(&mut self, id: &InstanceId) -> Option<&mut Instance> {
        self.instances.get_mut(id)
    }

    pub fn has_instance(&self, id: &InstanceId) -> bool {
        self.instances.contains_key(id)
    }

    /// Every instance, pseudo-instances (other nodes, other shards) included.
    pub fn instances(&self) -> impl Iterator<Item = &Instance> {
        self.instances.values()
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// A frame that broke the protocol (the connection is closed for it).
    pub fn count_protocol_error(&mut self) {
        self.stats.protocol_errors += 1;
    }

    /// A connection closed for reading its output too slowly.
    pub fn count_slow_consumer(&mut self) {
        self.stats.slow_consumers += 1;
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Requests in flight (accepted, not answered yet).
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }

    /// The senders of the requests in flight, one per request.
    pub fn in_flight_senders(&self) -> impl Iterator<Item = InstanceId> + '_ {
        self.inflight.values().map(|f| f.sender)
    }

    /// When the requests in flight fall due.
    pub fn timers(&self) -> &crate::timeouts::Timeouts {
        &self.timers
    }

    /// When the timer task is to wake next (see `Timeouts::next_deadline`).
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// A managed process slot, by its token.
    pub fn process(&self, token: &str) -> Option<&ProcessSlot> {
        self.processes.get(token)
    }

    pub fn process_mut(&mut self, token: &str) -> Option<&mut ProcessSlot> {
        self.processes.get_mut(token)
    }

    pub fn processes(&self) -> impl Iterator<Item = &ProcessSlot> {
        self.processes.values()
    }

    pub fn process_count(&self) -> usize {
        self.processes.len()
    }

    /// A managed process started: its threads may connect with `token`.
    pub fn add_process(&mut self, token: Rc<str>, slot: ProcessSlot) {
        self.processes.insert(token, slot);
    }

    pub fn remove_process(&mut self, token: &str) -> Option<ProcessSlot> {
        self.processes.remove(token)
    }

    /// A connection's task started or ended (a shutdown waits for them).
    pub fn connection_task_started(&mut self) {
        self.connection_tasks += 1;
    }

    pub fn connection_task_ended(&mut self) {
        self.connection_tasks -= 1;
    }

    /// Connections accepted that have not finished their handshake.
    pub fn handshaking(&self) -> usize {
        self.handshaking
    }

    pub fn handshake_started(&mut self) {
        self.handshaking += 1;
    }

    pub fn handshake_ended(&mut self) {
        self.handshaking -= 1;
    }

    /// The throttles of the warnings for connections refused over
    /// max_connections and in the handshake.
    pub fn limit_refusals(&mut self) -> &mut Throttle {
        &mut self.limit_refusals
    }

    pub fn handshake_refusals(&mut self) -> &mut Throttle {
        &mut self.handshake_refusals
    }

    /// What services built on the core show operators.
    pub fn reports(&self) -> &cumulo_service::Reports {
        &self.reports
    }

    pub fn reports_mut(&mut self) -> &mut cumulo_service::Reports {
        &mut self.reports
    }

    /// This node is one of a cloud: other nodes may be pseudo-instances.
    pub fn set_clustered(&mut self) {
        self.clustered = true;
    }

    pub fn handoff(&self) -> &crate::shards::handoff::Handoff {
        &self.handoff
    }

    pub fn handoff_mut(&mut self) -> &mut crate::shards::handoff::Handoff {
        &mut self.handoff
    }

    /// What instance of another shard (its pseudo-instance `id`) subscribes
    /// what.
    pub fn mirror(&self, id: &InstanceId) -> Option<&crate::shards::mirror::Mirror> {
        self.mirrors.get(id)
    }

    pub fn mirror_mut(&mut self, id: InstanceId) -> &mut crate::shards::mirror::Mirror {
        self.mirrors.entry(id).or_default()
    }

    /// The round-robin cursors shared with the other shards.
    pub fn set_turns(&mut self, turns: crate::shards::turns::Turns) {
        self.turns = Some(turns);
    }

    /// A trans_id for a request the core originates.
    pub fn next_trans_id(&mut self) -> TransId {
        self.ids.next()
    }

    /// The `[[client]]`s HELLOs may present a token of.
    pub fn set_clients(&mut self, clients: Rc<Clients>) {
        self.clients = clients;
    }

    /// The options unmanaged instances get (tests set their own).
    #[cfg(any(test, feature = "test-util"))]
    pub fn set_unmanaged_options(&mut self, options: Rc<ServiceOptions>) {
        self.unmanaged_options = options;
    }

    /// The counters of unmanaged instances.
    pub fn unmanaged_metrics(&self) -> &Rc<ServiceMetrics> {
        &self.unmanaged_metrics
    }

    /// Drops from the delivered list of `id` (another node's
    /// pseudo-instance) what is no longer in flight, and delivers what its
    /// window then has room for.
    pub fn forget_answered(&mut self, id: InstanceId) {
        let Some(inst) = self.instances.get_mut(&id) else { return };
        let before = inst.delivered.len();
        let inflight = &self.inflight;
        inst.delivered.retain(|t| inflight.contains_key(t));
        if inst.delivered.len() < before {
            self.pump(id);
        }
    }
}
