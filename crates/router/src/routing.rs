//! The hot path: a request arrives, is matched to a pattern, an instance is
//! chosen, and the request is delivered or queued; an answer goes back to its
//! sender. Every accepted request ends in exactly one RESPONSE: the answer,
//! or an error (NO_SERVICE, QUEUE_FULL, TIMEOUT, CRASHED, SHUTTING_DOWN).

use crate::availability::Verdict;
use crate::call_spans::{Call, Facts};
use crate::held::Held;
use crate::instance::{remaining_ms, Endpoint, Instance, OwnedRequest};
use crate::metrics::bump;
use crate::registry::{InstanceId, PatternEntry};
use crate::resilience::Track;
use crate::shards::mirror::Mirror;
use crate::state::{Core, InFlight};
use crate::RouteError;
use cumulo_config::DestRefresh;
use cumulo_proto::{Control, Frame, Return, Send, Status, TransId, REQUEST_MCAST, REQUEST_SYNC, SEND_WAIT_FOR_SERVICE};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A request being routed, borrowed from the frame it came in (or from an
/// owned copy when it was queued).
#[derive(Clone)]
pub struct Route<'a> {
    pub trans_id: TransId,
    pub sender: InstanceId,
    pub deadline: Instant,
    pub priority: i8,
    pub flags: u8,
    pub wait_for_service: bool,
    pub name: &'a str,
    pub request_info: &'a [u8],
    pub request: &'a [u8],
    /// A multicast copy from another shard: the pattern it was made for
    /// (served by an instance of that pattern here, not of the most
    /// specific one).
    pub via: Option<&'a str>,
    /// A request for another shard, or from one, made for one instance
    /// there (or here): a multicast copy, so that an instance matching by
    /// several patterns gets one copy (`shards::mirror`), or round robin's
    /// turn (`shards::turns`); 0: any instance.
    pub target: InstanceId,
    /// An instance not to pick: the shard that handed the request back for
    /// want of an instance there (`remote::come_back`), or the instance a
    /// retry's previous attempt failed at (then only while another can
    /// take it: `resilience`); 0: none.
    pub avoid: InstanceId,
    /// Retries made before this attempt (`resilience`).
    pub attempt: u8,
}

impl Route<'_> {
    pub(crate) fn to_owned(&self, pattern: Option<Rc<str>>) -> OwnedRequest {
        OwnedRequest {
            trans_id: self.trans_id,
            sender: self.sender,
            deadline: self.deadline,
            priority: self.priority,
            flags: self.flags,
            wait_for_service: self.wait_for_service,
            name: self.name.into(),
            pattern,
            request_info: self.request_info.into(),
            request: self.request.into(),
            target: self.target,
        }
    }
}

impl OwnedRequest {
    pub(crate) fn route(&self) -> Route<'_> {
        Route {
            trans_id: self.trans_id,
            sender: self.sender,
            deadline: self.deadline,
            priority: self.priority,
            flags: self.flags,
            wait_for_service: self.wait_for_service,
            name: &self.name,
            request_info: &self.request_info,
            request: &self.request,
            via: None,
            target: self.target,
            avoid: 0,
            attempt: 0,
        }
    }
}

/// What `Core::select` found for a request.
enum Selected {
    Instance(Chosen),
    /// No pattern subscribed by another than the sender matches its name.
    NoSubscriber,
    /// Subscribers, but none the sender's dest_refresh allows.
    NoneFits(DestRefresh),
}

/// The instance chosen for a request, and how.
struct Chosen {
    dest: InstanceId,
    /// The instance of another shard round robin chose there (0: none).
    target: InstanceId,
    how: DestRefresh,
    /// The pattern it was chosen by.
    pattern: Rc<str>,
    /// Its sender is another shard or node (whose own shard applies the
    /// sender's policies: `resilience`).
    sender_pseudo: bool,
}

/// The in-flight entry of a request accepted now for `dest` (0: parked).
#[inline]
fn in_flight(r: &Route<'_>, dest: InstanceId, timeout_ms: u32) -> InFlight {
    InFlight {
        sender: r.sender,
        dest,
        deadline: r.deadline,
        accepted: accepted_at(r.deadline, timeout_ms),
        timeout_ms,
        flags: r.flags,
        held: Held::No,
        for_restart: false,
        recheck: false,
        track: Default::default(),
    }
}

/// How far an instance is from the shard routing a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Distance {
    /// A connection or internal service of this shard.
    Near,
    /// Another shard of this node (a pseudo-instance, src/shards).
    Shard,
    /// Another node (a pseudo-instance, crates/cluster).
    Node,
}

pub(crate) fn distance(instances: &ahash::AHashMap<InstanceId, Instance>, id: &InstanceId) -> Distance {
    match instances.get(id).map(|i| &i.endpoint) {
        Some(Endpoint::Remote(_)) => Distance::Node,
        Some(Endpoint::Shard(_)) => Distance::Shard,
        _ => Distance::Near,
    }
}

/// Picks one instance of a pattern for a sender, or none when the policy
/// excludes them all (`*_local` with only remote ones, say). `spread`: other
/// nodes or shards are known, so some instances may be pseudo-instances.
/// `away`: instances at that distance may not take it (a request that came
/// from another node or shard is served on this side of it). `exclude`: an
/// instance never to pick (a CloudI sender is never its own destination,
/// docs/CLOUDI.md). `avoid`: another instance never to pick (a shard that
/// handed the request back). `out`: instances taken out of selection
/// (outlier ejection).
#[allow(clippy::too_many_arguments, reason = "each is one rule of the selection, named at the call")]
fn select(
    entry: &mut PatternEntry,
    how: DestRefresh,
    instances: &ahash::AHashMap<InstanceId, Instance>,
    spread: bool,
    away: Option<Distance>,
    exclude: Option<InstanceId>,
    avoid: Option<InstanceId>,
    out: Option<&dyn Fn(&InstanceId) -> bool>,
) -> Option<InstanceId> {
    use DestRefresh::*;
    let at = |id: &InstanceId| distance(instances, id);
    let allowed = |id: &InstanceId| {
        away != Some(at(id)) && Some(*id) != exclude && Some(*id) != avoid && !out.is_some_and(|o| o(id))
    };
    let restricted = away.is_some() || exclude.is_some() || avoid.is_some() || out.is_some();
    if how == RoundRobin {
        return next_where(entry, allowed);
    }
    let list = &entry.instances;
    // Nearest first: this shard, then another shard, then another node.
    // Among the shards of this node "nearest" gives way to load: an
    // instance here with room takes the request; when every one here is
    // busy, the request goes where fewer wait per instance, here or on
    // another shard (`shard_spill`), so that one shard's senders are not
    // held to its own instances while another shard's are idle.
    let closest = || {
        let near = |id: &InstanceId| at(id) == Distance::Near && allowed(id);
        if let Some(id) = pick_where(list, |id| near(id) && instances.get(id).is_some_and(Instance::is_free)) {
            return Some(id);
        }
        let shard = |id: &InstanceId| at(id) == Distance::Shard && allowed(id);
        match pick_least_busy(list, near, Instance::load, instances) {
            Some((id, load)) => match shard_spill(list, &entry.pattern, instances, shard) {
                Some((other, waiting)) if waiting < load => Some(other),
                _ => Some(id),
            },
            Option::None => pick_where(list, shard),
        }
        .or_else(|| pick_where(list, |id| at(id) == Distance::Node && allowed(id)))
    };
    if away.is_some() {
        return match how {
            ImmediateClosest | LazyClosest => closest(),
            _ => pick_where(list, allowed),
        };
    }
    match how {
        ImmediateLocal | LazyLocal if spread => return pick_where(list, |id| at(id) != Distance::Node && allowed(id)),
        ImmediateRemote | LazyRemote => return pick_where(list, |id| at(id) == Distance::Node && allowed(id)),
        ImmediateClosest | LazyClosest if spread => return closest(),
        ImmediateFurthest | LazyFurthest if spread => {
            return pick_where(list, |id| at(id) == Distance::Node && allowed(id))
                .or_else(|| pick_where(list, |id| at(id) != Distance::Node && allowed(id)))
        }
        // Instance ids grow as instances join the registry.
        ImmediateNewest | LazyNewest => return list.iter().copied().filter(allowed).max(),
        ImmediateOldest | LazyOldest => return list.iter().copied().filter(allowed).min(),
        _ => {}
    }
    if list.len() == 1 {
        return Some(list[0]).filter(allowed);
    }
    match how {
        LeastBusy => {
            // Ties go to a random one of the least busy, so equal instances
            // share the load instead of the first taking it all.
            let start = fastrand::usize(..list.len());
            (0..list.len())
                .map(|k| list[(start + k) % list.len()])
                .filter(allowed)
                .min_by_key(|id| instances.get(id).map_or(usize::MAX, Instance::load))
        }
        _ if restricted => pick_where(list, allowed),
        _ => Some(list[fastrand::usize(..list.len())]),
    }
}

/// Round robin with several shards: the next instance in turn of the
/// rotation every shard shares for this pattern (`shards::turns`): every
/// instance of the pattern on every shard (another shard's through its
/// mirror), each once per subscription, in instance id order. Returns the
/// instance to deliver to here (another shard's pseudo-instance for one
/// there) and the one there that serves it (0 for one here).
fn in_turn(
    entry: &mut PatternEntry,
    instances: &ahash::AHashMap<InstanceId, Instance>,
    mirrors: &ahash::AHashMap<InstanceId, Mirror>,
    turns: &crate::shards::turns::Turns,
    allowed: impl Fn(&InstanceId) -> bool,
) -> Option<(InstanceId, InstanceId)> {
    // (instance, where it is delivered from here). Built per request: the
    // instances of a round-robin pattern are a handful, and a cached order
    // would have to follow every shard's changes.
    let mut all: Vec<(InstanceId, InstanceId)> = Vec::with_capacity(entry.instances.len());
    let mut shards_listed: Vec<InstanceId> = Vec::new();
    for id in entry.instances.iter().filter(|id| allowed(id)) {
        match instances.get(id).map(|i| &i.endpoint) {
            Some(Endpoint::Shard(_)) => {
                if shards_listed.contains(id) {
                    continue;
                }
                shards_listed.push(*id);
                for (there, n) in mirrors.get(id).into_iter().flat_map(|m| m.holders(&entry.pattern)) {
                    all.extend(std::iter::repeat_n((there, *id), n as usize));
                }
            }
            _ => all.push((*id, *id)),
        }
    }
    if all.is_empty() {
        return Option::None;
    }
    all.sort_unstable();
    let cursor = entry.turn.get_or_insert_with(|| turns.cursor(&entry.pattern));
    let n = cursor.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (there, dest) = all[(n % all.len() as u64) as usize];
    Some((dest, if there == dest { 0 } else { there }))
}

/// The least busy instance of `list` that passes `keep` (by `load`), with
/// its load; ties go to a random one of them (reservoir sampling), so that
/// equal instances share the load.
fn pick_least_busy(
    list: &[InstanceId],
    keep: impl Fn(&InstanceId) -> bool,
    load: impl Fn(&Instance) -> usize,
    instances: &ahash::AHashMap<InstanceId, Instance>,
) -> Option<(InstanceId, usize)> {
    let mut best: Option<(InstanceId, usize)> = None;
    let mut ties = 0usize;
    for id in list.iter().filter(|id| keep(id)) {
        let Some(l) = instances.get(id).map(&load) else { continue };
        match best {
            Some((_, b)) if l > b => {}
            Some((_, b)) if l == b => {
                ties += 1;
                if fastrand::usize(..=ties) == 0 {
                    best = Some((*id, l));
                }
            }
            _ => {
                best = Some((*id, l));
                ties = 0;
            }
        }
    }
    best
}

/// The other shard with the fewest requests waiting per instance of
/// `pattern` there, and that figure: what this shard has in flight there
/// (only its own requests: it does not see what that shard's own senders
/// gave its instances) divided by that shard's subscriptions to the
/// pattern (its pseudo-instance here holds one per subscription there).
fn shard_spill(
    list: &[InstanceId],
    pattern: &str,
    instances: &ahash::AHashMap<InstanceId, Instance>,
    keep: impl Fn(&InstanceId) -> bool,
) -> Option<(InstanceId, usize)> {
    // The list names a shard once per subscription there: each time gives
    // the same figure, so no need to skip the repeats.
    let mut best: Option<(InstanceId, usize)> = None;
    for id in list.iter().filter(|id| keep(id)) {
        let Some(shard) = instances.get(id) else { continue };
        let waiting = shard.delivered.len() / shard.subscriptions.count(pattern).max(1) as usize;
        if best.is_none_or(|(_, b)| waiting < b) {
            best = Some((*id, waiting));
        }
    }
    best
}

/// The next instance after the round-robin cursor that passes `keep`.
fn next_where(entry: &mut PatternEntry, keep: impl Fn(&InstanceId) -> bool) -> Option<InstanceId> {
    for _ in 0..entry.instances.len() {
        entry.next = (entry.next + 1) % entry.instances.len();
        if keep(&entry.instances[entry.next]) {
            return Some(entry.instances[entry.next]);
        }
    }
    Option::None
}

/// A uniformly random instance among those that pass `keep`, in one pass
/// with no allocation (reservoir sampling of one).
fn pick_where(list: &[InstanceId], keep: impl Fn(&InstanceId) -> bool) -> Option<InstanceId> {
    let mut chosen = None;
    for (seen, id) in list.iter().filter(|id| keep(id)).enumerate() {
        if fastrand::usize(..=seen) == 0 {
            chosen = Some(*id);
        }
    }
    chosen
}

impl Core {
    /// Handles one frame from a socket instance after its handshake.
    pub fn handle_frame(&mut self, id: InstanceId, frame: Frame<'_>) -> Result<(), RouteError> {
        match frame {
            Frame::SendAsync(s) => self.send(id, &s, false),
            Frame::SendSync(s) => self.send(id, &s, true),
            Frame::Return(r) => self.ret(id, &r),
            Frame::Forward(s) => self.forward(id, &s),
            Frame::McastAsync(s) => {
                let (ids, failed) = self.mcast(id, &s);
                self.with_outbox(id, |b| crate::frames::mcast_sent(b, &s.trans_id, &ids));
                for (tid, status, msg) in failed {
                    self.respond(id, &tid, status, b"", msg.as_bytes());
                }
            }
            Frame::Subscribe(c) => {
                let r = self.subscribe(id, c.pattern).map(|_| 0);
                self.reply(id, &c, r);
            }
            Frame::Unsubscribe(c) => {
                let r = self.unsubscribe(id, c.pattern).map(|_| 0);
                self.reply(id, &c, r);
            }
            Frame::SubscribeCount(c) => {
                let r = Ok(self.subscribe_count(id, c.pattern));
                self.reply(id, &c, r);
            }
            Frame::Ping(n) => self.with_outbox(id, |b| crate::frames::pong(b, n)),
            Frame::Pong(_) => {}
            Frame::Goodbye => {
                // No new requests for it; what it holds it may still return.
                let subs = self.instances.get_mut(&id).map(|i| i.subscriptions.take());
                for p in subs.unwrap_or_default() {
                    self.registry.unsubscribe(&p, id);
                }
            }
            Frame::Hello(_) => return Err(RouteError::new(Status::Protocol, "HELLO sent twice")),
            other => {
                return Err(RouteError::new(
                    Status::Protocol,
                    format!("{} is a core-to-instance frame", other.type_name()),
                ));
            }
        }
        Ok(())
    }

    fn with_outbox(&self, id: InstanceId, write: impl FnOnce(&mut Vec<u8>)) {
        if let Some(Instance { endpoint: Endpoint::Socket(out), .. }) = self.instances.get(&id) {
            out.push(write);
        }
    }

    fn reply(&self, id: InstanceId, c: &Control, result: Result<u32, RouteError>) {
        let (status, value, message) = match &result {
            Ok(v) => (Status::Ok, *v, ""),
            Err(e) => (e.status, 0, e.why.as_str()),
        };
        self.with_outbox(id, |b| crate::frames::reply(b, c.req_id, status, value, message));
    }

    fn full_pattern(&self, id: InstanceId, pattern: &str) -> Result<String, RouteError> {
        let inst = self.instances.get(&id).ok_or_else(|| RouteError::new(Status::Protocol, "no such instance"))?;
        let full = format!("{}{}", inst.prefix, pattern);
        self.limits.names.check_pattern(&full).map_err(|why| RouteError::new(Status::InvalidArgument, why))?;
        Ok(full)
    }

    pub fn subscribe(&mut self, id: InstanceId, pattern: &str) -> Result<(), RouteError> {
        if self.instances.get(&id).is_some_and(|i| i.retiring) {
            return Err(RouteError::new(
                Status::ShuttingDown,
                "this instance was told to terminate: it may not subscribe",
            ));
        }
        let full = self.full_pattern(id, pattern)?;
        if self.instances.get(&id).is_some_and(|i| i.outside_services) {
            if let Some(service) = self.availability.service_under(&full) {
                self.stats.denied += 1;
                return Err(RouteError::new(
                    Status::Unauthorized,
                    format!(
                        "'{full}' could take requests of the service at '{service}': an instance without a token \
                         may not subscribe it here (core.*_anonymous = \"outside_services\")"
                    ),
                ));
            }
        }
        // Another node's pseudo-instance holds that node's subscriptions,
        // bounded by cluster::members (MAX_REMOTE_SUBSCRIPTIONS) instead.
        let over = |i: &Instance| i.subscriptions.len() >= self.limits.max_subscriptions && !i.endpoint.is_pseudo();
        if self.instances.get(&id).is_some_and(over) {
            let max = self.limits.max_subscriptions;
            return Err(RouteError::new(
                Status::InvalidArgument,
                format!("this instance already holds {max} subscriptions (core.max_subscriptions)"),
            ));
        }
        let key = self.registry.subscribe(&full, id);
        if let Some(inst) = self.instances.get_mut(&id) {
            tracing::debug!(instance = id, "{} subscribed {full}", inst.label);
            let first = inst.subscriptions.is_empty();
            inst.subscriptions.push(key);
            if first {
                self.note_serving(&self.instances[&id], true);
            }
        }
        if !self.parked.is_empty() {
            for q in self.unpark_matching(&full) {
                self.reroute(q);
            }
        }
        Ok(())
    }

    pub fn unsubscribe(&mut self, id: InstanceId, pattern: &str) -> Result<(), RouteError> {
        let full = self.full_pattern(id, pattern)?;
        if !self.registry.unsubscribe(&full, id) {
            return Err(RouteError::new(
                Status::InvalidArgument,
                format!("'{full}' is not subscribed by this instance"),
            ));
        }
        if let Some(inst) = self.instances.get_mut(&id) {
            inst.subscriptions.remove(&full);
            if inst.subscriptions.is_empty() {
                self.note_serving(&self.instances[&id], false);
            }
        }
        Ok(())
    }

    pub fn subscribe_count(&self, id: InstanceId, pattern: &str) -> u32 {
        self.full_pattern(id, pattern).map_or(0, |full| self.registry.count(&full, id))
    }

    /// SEND_ASYNC / SEND_SYNC from instance `id`.
    pub fn send(&mut self, id: InstanceId, s: &Send<'_>, sync: bool) {
        let now = self.now;
        let Some(sender) = self.instances.get(&id) else { return };
        bump(&sender.metrics.sent);
        let opts = sender.options.clone();
        let fail = |core: &Core, status: Status, msg: String| {
            core.respond(id, &s.trans_id, status, b"", msg.as_bytes());
        };
        if s.trans_id.instance_id() != id || s.trans_id.node_id() != self.limits.node_id {
            return fail(
                self,
                Status::Malformed,
                format!(
                    "trans_id {} is not stamped with this instance (node {}, instance {id}); see PROTOCOL.md 2.2",
                    s.trans_id, self.limits.node_id
                ),
            );
        }
        if self.inflight.contains_key(&s.trans_id) {
            return fail(self, Status::Malformed, format!("trans_id {} is already in flight", s.trans_id));
        }
        if let Err(why) = self.limits.names.check_name(s.name) {
            return fail(self, Status::InvalidArgument, why);
        }
        if let Some(why) = self.refused_by_acl(id, s.name) {
            return fail(self, Status::Unauthorized, why);
        }
        if self.shutting_down {
            return fail(self, Status::ShuttingDown, "the core is shutting down".into());
        }
        if opts.dest_refresh == DestRefresh::None {
            return fail(self, Status::InvalidArgument, "this service has dest_refresh = none: it may not send".into());
        }
        let timeout = match s.timeout {
            0 if sync => opts.timeout_sync,
            0 => opts.timeout_async,
            t => t,
        };
        let timeout =
            if self.resilience.is_some() { self.policy_timeout(s.trans_id, s.name, timeout) } else { timeout };
        self.stats.requests += 1;
        let call = if sync { Call::SendSync } else { Call::SendAsync };
        let began = self.spans.as_deref().and_then(|spans| {
            let facts = Facts { call, name: s.name, timeout_ms: timeout, priority: s.priority, now };
            spans.begin(s.trans_id, s.request_info, &facts)
        });
        let route = Route {
            trans_id: s.trans_id,
            sender: id,
            deadline: now + Duration::from_millis(timeout as u64),
            priority: s.priority,
            flags: if sync { REQUEST_SYNC } else { 0 },
            wait_for_service: s.flags & SEND_WAIT_FOR_SERVICE != 0,
            name: s.name,
            request_info: began.as_deref().unwrap_or(s.request_info),
            request: s.request,
            via: None,
            target: 0,
            avoid: 0,
            attempt: 0,
        };
        self.route(&route, false, timeout);
    }

    /// Why the sender's rules (dest_list_allow / dest_list_deny) refuse it
    /// `name`, counted; None when they allow it or it has none (one branch).
    #[inline]
    fn refused_by_acl(&mut self, id: InstanceId, name: &str) -> Option<String> {
        let why = self.instances.get(&id)?.acl.as_ref()?.check(name).err()?;
        self.stats.denied += 1;
        Some(why)
    }

    /// Routes a new request (`rerouted` false) or one already in flight
    /// (forwarded or re-routed; its timer is already armed): selects an
    /// instance, then delivers it there or queues it; with no subscriber it
    /// waits for one (WAIT_FOR_SERVICE) or fails.
    pub(crate) fn route(&mut self, r: &Route<'_>, rerouted: bool, timeout_ms: u32) {
        // A request from another shard carries its sender's dest_refresh in
        // its flags (shards::policy_bits); here the flags are the sender's.
        let policy = crate::shards::policy_of(r.flags);
        let stripped;
        let r = match policy {
            Some(_) => {
                stripped = Route { flags: r.flags & crate::shards::FLAGS_MASK, ..r.clone() };
                &stripped
            }
            None => r,
        };
        let how = match self.select(r, rerouted, policy) {
            Selected::Instance(chosen) if self.resilience.is_some() => {
                return self.route_planned(r, rerouted, timeout_ms, chosen)
            }
            Selected::Instance(chosen) => {
                return self.deliver_or_queue(r, rerouted, timeout_ms, chosen, Track::default())
            }
            Selected::NoSubscriber => {
                if r.wait_for_service && self.now < r.deadline {
                    return self.park_for_subscriber(r, rerouted, timeout_ms, false);
                }
                return self.no_subscriber(r, rerouted, timeout_ms);
            }
            Selected::NoneFits(how) => how,
        };
        let msg = format!("no instance for '{}' fits this sender's dest_refresh ({how:?})", r.name);
        self.no_service(r, rerouted, msg)
    }

    /// The instance `r` goes to, by its sender's dest_refresh (`policy`
    /// when another shard sent it) among the subscribers of its name.
    #[inline]
    fn select(&mut self, r: &Route<'_>, rerouted: bool, policy: Option<DestRefresh>) -> Selected {
        // A request from another node is served here, by a local instance
        // (multicast copies in turn, one per instance); once forwarded or
        // re-routed it may go on, closest first.
        // The same for a request from another shard: it is served on this
        // shard (or sent on to another node, never to a third shard).
        let (how, from, sender_pseudo) = match self.instances.get(&r.sender) {
            Some(i) => match i.endpoint {
                Endpoint::Remote(_) | Endpoint::Shard(_) if rerouted => (DestRefresh::ImmediateClosest, None, true),
                Endpoint::Remote(_) | Endpoint::Shard(_) if r.flags & REQUEST_MCAST != 0 => {
                    (DestRefresh::RoundRobin, Some(distance(&self.instances, &r.sender)), true)
                }
                Endpoint::Shard(_) => (policy.unwrap_or(i.options.dest_refresh), Some(Distance::Shard), true),
                Endpoint::Remote(_) => (i.options.dest_refresh, Some(Distance::Node), true),
                _ => (i.options.dest_refresh, None, false),
            },
            None => (DestRefresh::ImmediateClosest, None, false),
        };
        let exclude = crate::rules::excluded(&self.instances, r.sender);
        // A pattern only the excluded sender serves has no subscriber for it.
        let found = match r.via {
            Some(pattern) => self.registry.entry_mut(pattern),
            None => self.registry.lookup(r.name),
        };
        let Some(entry) = found.filter(|e| crate::rules::serves_other(e, exclude)) else {
            return Selected::NoSubscriber;
        };
        let spread = self.clustered || self.shard.count > 1;
        // A request another shard made for one instance here (a multicast
        // copy, round robin's turn) goes to it while it still subscribes
        // the pattern it was chosen by.
        let named = match r.via {
            Some(pattern) if r.target != 0 => {
                self.instances.get(&r.target).filter(|i| !i.retiring && i.subscriptions.count(pattern) > 0)
            }
            _ => None,
        };
        // A retry another shard or node sends again avoids the instance
        // here its last attempt failed at (`resilience`), while another
        // can take it.
        let remembered = match (r.avoid, self.resilience.as_deref_mut()) {
            (0, Some(res)) if from.is_some() => res.failed_here(&r.trans_id),
            _ => None,
        };
        let lenient = r.attempt > 0 || remembered.is_some();
        let avoid = Some(r.avoid).filter(|a| *a != 0).or(remembered);
        // Instances taken out by outlier ejection (`resilience`); when
        // nothing else is left they still serve, as does the instance a
        // retry's last attempt failed at.
        let ejected = self.resilience.as_deref().and_then(|x| x.ejected());
        let unhealthy = self.health.as_deref().and_then(|h| h.unhealthy());
        let now = self.now;
        let out = |id: &InstanceId| {
            ejected.is_some_and(|e| e.get(id).is_some_and(|until| *until > now))
                || unhealthy.is_some_and(|u| u.contains(id))
        };
        let any_out = ejected.is_some() || unhealthy.is_some();
        let mut chosen = None;
        for (skip_out, avoid) in [(any_out, avoid), (false, avoid.filter(|_| !lenient))] {
            chosen = match (named, &self.turns) {
                (Some(i), _) => Some((i.id, 0)),
                (None, Some(turns)) if how == DestRefresh::RoundRobin => {
                    let allowed = |id: &InstanceId| {
                        from != Some(distance(&self.instances, id))
                            && Some(*id) != exclude
                            && Some(*id) != avoid
                            && !(skip_out && out(id))
                    };
                    in_turn(entry, &self.instances, &self.mirrors, turns, allowed)
                }
                (None, _) => {
                    let skip = skip_out.then_some(&out as &dyn Fn(&InstanceId) -> bool);
                    select(entry, how, &self.instances, spread, from, exclude, avoid, skip).map(|d| (d, 0))
                }
            };
            if chosen.is_some() || (!skip_out && (avoid.is_none() || !lenient)) {
                break;
            }
        }
        match chosen {
            Some((dest, target)) => {
                Selected::Instance(Chosen { dest, target, how, pattern: entry.pattern.clone(), sender_pseudo })
            }
            None => Selected::NoneFits(how),
        }
    }

    /// Waits for a subscriber (WAIT_FOR_SERVICE) within the request's
    /// deadline, bounded by core.max_parked and the bytes held.
    fn park_for_subscriber(&mut self, r: &Route<'_>, rerouted: bool, timeout_ms: u32, for_restart: bool) {
        let bytes = crate::held::weight(r.name, r.request_info, r.request);
        if let Err(why) = self.holds.room(r.sender, bytes, &self.limits) {
            self.stats.queue_full += 1;
            let msg = format!("no service subscribes '{}' yet, and {why}", r.name);
            return self.fail(r, rerouted, Status::QueueFull, msg);
        }
        if self.parked.len() >= self.limits.max_parked {
            self.stats.queue_full += 1;
            let msg = format!(
                "no service subscribes '{}' yet, and {} requests already wait for one (core.max_parked)",
                r.name, self.limits.max_parked
            );
            return self.fail(r, rerouted, Status::QueueFull, msg);
        }
        if !rerouted {
            self.arm_timer(r.trans_id, r.deadline);
            self.inflight.insert(r.trans_id, InFlight { for_restart, ..in_flight(r, 0, timeout_ms) });
        } else if let Some(f) = self.inflight.get_mut(&r.trans_id) {
            f.dest = 0;
            f.for_restart = for_restart;
            f.recheck = false;
        }
        self.park(r.to_owned(None));
    }

    /// `deliver_or_queue` under the policy of the request's name: refused
    /// at once by an open breaker, given this attempt's deadline, tracked
    /// to its outcome (`resilience`).
    fn route_planned(&mut self, r: &Route<'_>, rerouted: bool, timeout_ms: u32, chosen: Chosen) {
        let tid = r.trans_id;
        match self.plan(r, chosen.dest, &chosen.pattern, chosen.sender_pseudo) {
            crate::resilience::Plan::Plain => self.deliver_or_queue(r, rerouted, timeout_ms, chosen, Track::default()),
            crate::resilience::Plan::Refused(msg) => {
                self.stats.unavailable += 1;
                self.fail_now(r, rerouted, Status::Unavailable, msg)
            }
            crate::resilience::Plan::Go(track, shorter) => {
                let shortened;
                let attempt = match shorter {
                    Some(deadline) => {
                        shortened = Route { deadline, ..r.clone() };
                        &shortened
                    }
                    None => r,
                };
                self.deliver_or_queue(attempt, rerouted, timeout_ms, chosen, track);
                if let Some(deadline) = shorter {
                    // Not when it was refused and now waits for a retry (dest 0).
                    if let Some(f) = self.inflight.get_mut(&tid).filter(|f| f.dest != 0) {
                        f.accepted = accepted_at(r.deadline, timeout_ms).min(f.accepted);
                        if rerouted {
                            f.deadline = deadline;
                            self.arm_timer(tid, deadline);
                        }
                    }
                }
            }
        }
    }

    /// Delivers `r` to the instance selected, or queues it there when the
    /// instance's window is full (bounded: `queue_room`).
    #[inline]
    fn deliver_or_queue(&mut self, r: &Route<'_>, rerouted: bool, timeout_ms: u32, chosen: Chosen, track: Track) {
        let Chosen { dest, target, how, pattern, .. } = chosen;
        let Some(inst) = self.instances.get(&dest) else {
            return self.fail(r, rerouted, Status::NoService, format!("no instance left for '{}'", r.name));
        };
        if rerouted && dest == r.sender && inst.endpoint.is_pseudo() {
            // Forwarded (or re-routed) back to the shard or node it came
            // from, which still holds its entry and timer: handed back,
            // forgotten here. Keeping an entry here would make the two
            // sides answer each other for it (`remote::come_back`).
            self.inflight.remove(&r.trans_id);
            return send_to(inst, r, &pattern, self.limits.node_id, self.now);
        }
        let deliver_now = inst.is_free();
        if !deliver_now {
            if let Err(msg) = self.queue_room(dest, r) {
                self.stats.queue_full += 1;
                if let Some(inst) = self.instances.get(&dest) {
                    inst.metrics.failed(Status::QueueFull);
                }
                return self.fail_at(r, rerouted, Status::QueueFull, msg, dest);
            }
        }
        let inst = &self.instances[&dest];
        bump(&inst.metrics.received);
        if rerouted {
            if let Some(f) = self.inflight.get_mut(&r.trans_id) {
                f.dest = dest;
                f.held = Held::No;
                f.track = track;
            }
        } else {
            self.arm_timer(r.trans_id, r.deadline);
            self.inflight.insert(r.trans_id, InFlight { track, ..in_flight(r, dest, timeout_ms) });
        }
        if let Some(spans) = self.spans.as_deref().filter(|s| s.any_open()) {
            spans.delivered(&r.trans_id, &pattern, !deliver_now, self.now);
        }
        let node = self.limits.node_id;
        // Another shard picks among its instances as this sender asked
        // (one shard: no lookup on this path).
        let marked;
        let r = if self.shard.count > 1 && distance(&self.instances, &dest) == Distance::Shard {
            // ... and serves it by `target` when round robin chose one.
            marked = Route { flags: r.flags | crate::shards::policy_bits(how), target, ..r.clone() };
            &marked
        } else {
            r
        };
        if deliver_now {
            let inst = self.instances.get_mut(&dest).unwrap();
            deliver(inst, r, &pattern, node, self.now);
        } else {
            self.enqueue(dest, r.to_owned(Some(pattern)));
        }
    }

    /// Whether instance `dest`'s queue, the request's sender and the core
    /// have room for `r`; if not, the message of its QUEUE_FULL. Bounded by
    /// count (queue_limit) and by bytes (queue_size per instance,
    /// core.max_sender_queued_bytes per sender, core.max_queued_bytes in
    /// all), so that no peer can make the core hold unbounded memory.
    fn queue_room(&self, dest: InstanceId, r: &Route<'_>) -> Result<(), String> {
        let Some(inst) = self.instances.get(&dest) else { return Ok(()) };
        let bytes = crate::held::weight(r.name, r.request_info, r.request);
        let (n, held) = (inst.queue.len(), inst.queue.bytes());
        if n >= inst.options.queue_limit as usize {
            let limit = match inst.endpoint {
                Endpoint::Remote(_) => "the most queued for another node, config::NODE_QUEUE_LIMIT",
                Endpoint::Shard(_) => "the most queued for another shard, config::SHARD_QUEUE_LIMIT",
                _ => "queue_limit",
            };
            return Err(format!("queue of {} is full ({n} requests, {limit})", inst.label));
        }
        if held + bytes > inst.options.queue_size as usize {
            return Err(format!(
                "queue of {} is full ({held} bytes waiting; {bytes} more would pass queue_size, {})",
                inst.label, inst.options.queue_size
            ));
        }
        self.holds.room(r.sender, bytes, &self.limits).map_err(|why| format!("queue of {}: {why}", inst.label))
    }

    /// A request for a name nothing subscribes: it waits for the instance
    /// of the configured service that covers the name while that service
    /// (re)starts, is UNAVAILABLE at once when the service was given up or
    /// stopped, and NO_SERVICE otherwise (`availability`).
    #[cold]
    fn no_subscriber(&mut self, r: &Route<'_>, rerouted: bool, timeout_ms: u32) {
        // Another shard's request that finds no instance here goes back to
        // it (`no_service`): that shard decides.
        let from_shard = self.instances.get(&r.sender).is_some_and(|i| matches!(i.endpoint, Endpoint::Shard(_)));
        if !from_shard {
            match self.availability.verdict(r.name) {
                Verdict::Wait if self.now < r.deadline => {
                    return self.park_for_subscriber(r, rerouted, timeout_ms, true);
                }
                Verdict::Recheck(left) if self.now < r.deadline => {
                    self.park_for_subscriber(r, rerouted, timeout_ms, false);
                    if let Some(f) = self.inflight.get_mut(&r.trans_id).filter(|f| f.dest == 0) {
                        f.recheck = true;
                        let at = (self.now + left).min(r.deadline);
                        self.arm_timer(r.trans_id, at);
                    }
                    return;
                }
                Verdict::Unavailable(msg) => {
                    self.stats.unavailable += 1;
                    return self.fail(r, rerouted, Status::Unavailable, msg);
                }
                _ => {}
            }
        }
        let msg = format!("no service subscribes a pattern matching '{}'", r.name);
        self.no_service(r, rerouted, msg)
    }

    /// NO_SERVICE, except for a request another shard sent here that finds
    /// no instance here: that shard's replica of this shard's subscriptions
    /// was behind (an instance here had just gone or been retired). It is
    /// handed back, and that shard routes it again, not here
    /// (`remote::come_back`), so a service with instances left elsewhere
    /// keeps answering while its processes come and go.
    fn no_service(&mut self, r: &Route<'_>, rerouted: bool, msg: String) {
        if !rerouted && r.via.is_none() {
            if let Some(shard) = self.instances.get(&r.sender).filter(|i| matches!(i.endpoint, Endpoint::Shard(_))) {
                return send_to(shard, r, "", self.limits.node_id, self.now);
            }
        }
        self.fail(r, rerouted, Status::NoService, msg)
    }

    /// Ends a request that could not be routed with an explicit error, or
    /// keeps it for a retry when its policy says so (`resilience`).
    fn fail(&mut self, r: &Route<'_>, rerouted: bool, status: Status, msg: String) {
        self.fail_at(r, rerouted, status, msg, 0)
    }

    /// `fail`, for a request refused by instance `at` (a retry avoids it).
    fn fail_at(&mut self, r: &Route<'_>, rerouted: bool, status: Status, msg: String, at: InstanceId) {
        if self.resilience.is_some() {
            let timeout = self
                .inflight
                .get(&r.trans_id)
                .map_or_else(|| r.deadline.saturating_duration_since(self.now).as_millis() as u32, |f| f.timeout_ms);
            if self.retry_unsent(r, rerouted, timeout, status, at) {
                return;
            }
        }
        self.fail_now(r, rerouted, status, msg)
    }

    /// Ends a request that could not be routed with an explicit error.
    fn fail_now(&mut self, r: &Route<'_>, rerouted: bool, status: Status, msg: String) {
        if let Some(res) = self.resilience.as_deref_mut() {
            res.forget(&r.trans_id);
        }
        if rerouted {
            self.inflight.remove(&r.trans_id);
        }
        if status == Status::NoService {
            self.stats.no_service += 1;
        }
        self.respond(r.sender, &r.trans_id, status, b"", msg.as_bytes());
    }

    /// A queued or parked request whose instance went away, or that now has a
    /// subscriber: route it again.
    /// A request parked for a moment (`Verdict::Recheck`) that no
    /// subscription took meanwhile: routed again, now NO_SERVICE unless its
    /// name came to be subscribed.
    pub(crate) fn recheck(&mut self, tid: TransId) {
        let Some(f) = self.inflight.get_mut(&tid) else { return };
        f.recheck = false;
        // A subscription took it meanwhile (it may even be waiting out a
        // retry's backoff now, dest 0 but not parked): nothing to look at.
        if !matches!(f.held, Held::Parked(_)) {
            return;
        }
        let held = std::mem::replace(&mut f.held, Held::No);
        if let Some(q) = self.unhold(held, 0) {
            self.reroute(q);
        }
    }

    pub fn reroute(&mut self, q: OwnedRequest) {
        let timeout = self.inflight.get(&q.trans_id).map_or(0, |f| f.timeout_ms);
        self.route(&q.route(), true, timeout);
    }

    /// Delivers queued requests while the instance has room.
    pub fn pump(&mut self, id: InstanceId) {
        let node = self.limits.node_id;
        let now = self.now;
        let Some(inst) = self.instances.get_mut(&id) else { return };
        while inst.has_room() {
            let Some(q) = inst.queue.pop() else { break };
            self.holds.release(&q);
            let Some(f) = self.inflight.get_mut(&q.trans_id) else { continue };
            f.held = Held::No;
            if let Some(spans) = self.spans.as_deref().filter(|s| s.any_open()) {
                spans.dequeued(&q.trans_id, now);
            }
            let pattern = q.pattern.clone().unwrap_or_else(|| Rc::from(""));
            deliver(inst, &q.route(), &pattern, node, now);
        }
    }

    /// RETURN from the instance that handled a request.
    pub fn ret(&mut self, id: InstanceId, r: &Return<'_>) {
        let Some(inst) = self.instances.get_mut(&id) else { return };
        let now = self.now;
        // A late answer is counted once: another shard's TIMEOUT for a
        // request timed out here too is not an answer (that shard counts the
        // service's answer if it comes late there).
        let shard_timeout = matches!(inst.endpoint, Endpoint::Shard(_)) && r.status == Status::Timeout.code();
        let counts_late = !shard_timeout;
        let Some(i) = inst.delivered.iter().position(|t| *t == r.trans_id) else {
            self.stats.late += counts_late as u64;
            return; // late (timed out) or unknown: nobody waits for it
        };
        inst.delivered.swap_remove(i);
        match self.inflight.remove(&r.trans_id) {
            Some(f) if f.sender == crate::health::PROBE_SENDER && self.health.is_some() => {
                inst.metrics.answered(
                    Status::from_code(r.status),
                    now.saturating_duration_since(f.accepted).as_micros() as u64,
                );
                self.probe_answered(&r.trans_id, Some(Status::from_code(r.status)));
            }
            Some(f) => {
                self.stats.responses += 1;
                let status = cumulo_proto::Status::from_code(r.status);
                // Another shard's TIMEOUT for a request that entered here:
                // counted here, where the sender is answered (`expire`).
                if shard_timeout {
                    self.stats.timeouts += 1;
                }
                inst.metrics.answered(status, now.saturating_duration_since(f.accepted).as_micros() as u64);
                if !(f.track.is_tracked() && self.settle(r.trans_id, &f, status, id)) {
                    self.respond(f.sender, &r.trans_id, status, r.response_info, r.response);
                }
            }
            None => self.stats.late += counts_late as u64,
        }
        self.pump(id);
    }

    /// FORWARD: the instance hands the request it is handling to another
    /// name; the original sender will get the final answer, within what is
    /// left of the original timeout.
    pub fn forward(&mut self, id: InstanceId, s: &Send<'_>) {
        let now = self.now;
        let Some(inst) = self.instances.get_mut(&id) else { return };
        let Some(i) = inst.delivered.iter().position(|t| *t == s.trans_id) else {
            return; // timed out already: its sender has its answer
        };
        inst.delivered.swap_remove(i);
        let Some(f) = self.inflight.get_mut(&s.trans_id) else {
            self.pump(id);
            return;
        };
        let mut shortened = None;
        if s.timeout > 0 {
            let asked = now + Duration::from_millis(s.timeout as u64);
            if asked < f.deadline {
                f.deadline = asked;
                shortened = Some(asked);
            }
        }
        let began = self.spans.as_deref().and_then(|spans| {
            let facts =
                Facts { call: Call::Forward, name: s.name, timeout_ms: f.timeout_ms, priority: s.priority, now };
            spans.forwarded(s.trans_id, s.request_info, &facts)
        });
        let route = Route {
            trans_id: s.trans_id,
            sender: f.sender,
            deadline: f.deadline,
            priority: s.priority,
            flags: f.flags,
            wait_for_service: s.flags & SEND_WAIT_FOR_SERVICE != 0,
            name: s.name,
            request_info: began.as_deref().unwrap_or(s.request_info),
            request: s.request,
            via: None,
            target: 0,
            avoid: 0,
            attempt: 0,
        };
        let timeout = f.timeout_ms;
        if let Some(at) = shortened {
            // The entry of the later deadline is left behind (lazy timers).
            self.arm_timer(s.trans_id, at);
        }
        self.stats.forwards += 1;
        match self.limits.names.check_name(s.name) {
            Err(why) => self.fail(&route, true, Status::InvalidArgument, why),
            Ok(()) => match self.refused_by_acl(id, s.name) {
                Some(why) => self.fail(&route, true, Status::Unauthorized, why),
                None => self.route(&route, true, timeout),
            },
        }
        self.pump(id);
    }

    /// MCAST_ASYNC: one copy to every instance of every matching pattern
    /// (from a CloudI sender, CloudI's rule: `cloudi::rules`).
    /// Returns the copies' trans_ids, and the copies that failed at once
    /// (to be answered after MCAST_SENT).
    pub fn mcast(&mut self, id: InstanceId, s: &Send<'_>) -> (Vec<TransId>, Vec<(TransId, Status, String)>) {
        let now = self.now;
        let Some(sender) = self.instances.get(&id) else { return (vec![], vec![]) };
        let timeout = if s.timeout == 0 { sender.options.timeout_async } else { s.timeout };
        let timeout =
            if self.resilience.is_some() { self.policy_timeout(s.trans_id, s.name, timeout) } else { timeout };
        let deadline = now + Duration::from_millis(timeout as u64);
        let mut ids = Vec::new();
        let mut failed = Vec::new();
        if self.shutting_down {
            return (ids, failed);
        }
        if let Err(why) = self.limits.names.check_name(s.name) {
            // One copy, failed at once: the sender learns why.
            let tid = self.ids.next();
            return (vec![tid], vec![(tid, Status::InvalidArgument, why)]);
        }
        if let Some(why) = self.refused_by_acl(id, s.name) {
            let tid = self.ids.next();
            return (vec![tid], vec![(tid, Status::Unauthorized, why)]);
        }
        let node = self.limits.node_id;
        // CloudI's list has one entry per subscription already.
        let dests: Vec<(InstanceId, Rc<str>, InstanceId)> = match crate::rules::excluded(&self.instances, id) {
            Some(sender) => crate::rules::mcast_destinations(&mut self.registry, s.name, sender)
                .into_iter()
                .map(|(d, p)| (d, p, 0))
                .collect(),
            None if self.clustered || self.shard.count > 1 => self.mcast_copies(s.name),
            None => self.registry.lookup_all(s.name).into_iter().map(|(d, p)| (d, p, 0)).collect(),
        };
        for (dest, pattern, target) in dests {
            let tid = self.ids.next();
            ids.push(tid);
            // A copy is for its instance: its breaker and ejection apply,
            // a retry elsewhere would give another instance two copies.
            let track = match self.resilience.is_some() {
                true => match self.plan_copy(id, s.name, &pattern) {
                    Ok(track) => track,
                    Err(msg) => {
                        failed.push((tid, Status::Unavailable, msg));
                        continue;
                    }
                },
                false => Default::default(),
            };
            let Some(inst) = self.instances.get(&dest) else { continue };
            let deliver_now = inst.is_free();
            let began = self.spans.as_deref().and_then(|spans| {
                let facts = Facts { call: Call::Mcast, name: s.name, timeout_ms: timeout, priority: s.priority, now };
                spans.begin(tid, s.request_info, &facts)
            });
            let route = Route {
                trans_id: tid,
                sender: id,
                deadline,
                priority: s.priority,
                flags: REQUEST_MCAST,
                wait_for_service: false,
                name: s.name,
                request_info: began.as_deref().unwrap_or(s.request_info),
                request: s.request,
                via: None,
                target,
                avoid: 0,
                attempt: 0,
            };
            if !deliver_now {
                if let Err(msg) = self.queue_room(dest, &route) {
                    inst.metrics.failed(Status::QueueFull);
                    failed.push((tid, Status::QueueFull, msg));
                    continue;
                }
            }
            bump(&inst.metrics.received);
            self.arm_timer(tid, deadline);
            let f = InFlight {
                sender: id,
                dest,
                deadline,
                accepted: now,
                timeout_ms: timeout,
                flags: REQUEST_MCAST,
                held: Held::No,
                for_restart: false,
                recheck: false,
                track,
            };
            self.inflight.insert(tid, f);
            self.stats.requests += 1;
            if let Some(spans) = self.spans.as_deref().filter(|s| s.any_open()) {
                spans.delivered(&tid, &pattern, !deliver_now, now);
            }
            if deliver_now {
                deliver(self.instances.get_mut(&dest).unwrap(), &route, &pattern, node, now);
            } else {
                self.enqueue(dest, route.to_owned(Some(pattern)));
            }
        }
        if let Some(sender) = self.instances.get(&id) {
            sender.metrics.sent.set(sender.metrics.sent.get() + ids.len() as u64);
        }
        (ids, failed)
    }

    /// A multicast's copies with other shards or nodes known: one per local
    /// instance, one per instance of another shard (named by `target`, from
    /// that shard's `Mirror`, so that an instance there matching by several
    /// patterns gets one copy as a local one does), and one per instance of
    /// another node (that node's pseudo-instance holds one subscription per
    /// instance there).
    fn mcast_copies(&self, name: &str) -> Vec<(InstanceId, Rc<str>, InstanceId)> {
        let instances = &self.instances;
        let pseudo = |i: InstanceId| instances.get(&i).is_some_and(|x| x.endpoint.is_pseudo());
        let mut out = Vec::new();
        let mut seen: ahash::AHashMap<InstanceId, ahash::AHashSet<InstanceId>> = Default::default();
        let mut targets = Vec::new();
        for (dest, pattern) in self.registry.lookup_all_by_pattern(name, pseudo) {
            match instances.get(&dest).map(|i| &i.endpoint) {
                Some(Endpoint::Shard(_)) => {
                    let Some(mirror) = self.mirrors.get(&dest) else { continue };
                    targets.clear();
                    mirror.copies(&pattern, seen.entry(dest).or_default(), &mut targets);
                    out.extend(targets.iter().map(|&t| (dest, pattern.clone(), t)));
                }
                Some(Endpoint::Remote(_)) => {
                    let copies = self.registry.count(&pattern, dest).max(1);
                    out.extend(std::iter::repeat_n((dest, pattern, 0), copies as usize));
                }
                _ => out.push((dest, pattern, 0)),
            }
        }
        out
    }
}

/// When a new request was accepted: its deadline less its timeout (what
/// `send` computed the deadline from), so routing needs no clock read.
fn accepted_at(deadline: Instant, timeout_ms: u32) -> Instant {
    deadline.checked_sub(Duration::from_millis(timeout_ms as u64)).unwrap_or(deadline)
}

/// Hands a request to an instance that has room: encoded straight into its
/// socket's outbox (no copy of the payload besides that one), or copied to an
/// internal service.
pub(crate) fn deliver(inst: &mut Instance, r: &Route<'_>, pattern: &str, node_id: u32, now: Instant) {
    inst.delivered.push(r.trans_id);
    send_to(inst, r, pattern, node_id, now);
}

/// Writes a request to an instance (its socket's outbox, or its internal
/// inbox), without recording it as delivered there.
fn send_to(inst: &Instance, r: &Route<'_>, pattern: &str, node_id: u32, now: Instant) {
    let timeout = remaining_ms(r.deadline, now);
    let to_shard = matches!(inst.endpoint, Endpoint::Shard(_));
    let source = match r.sender {
        // Between shards the source names the instance there that serves
        // the request (a multicast copy's, `shards::mirror`; round robin's
        // turn, `shards::turns`), 0 for any: the receiving shard answers
        // through its pseudo-instance of this one, not by source.
        _ if to_shard => r.target as u64,
        0 => 0,
        sender => ((node_id as u64) << 32) | sender as u64,
    };
    // Only another shard reads the sender's dest_refresh in the flags.
    let flags = if to_shard { r.flags } else { r.flags & crate::shards::FLAGS_MASK };
    match &inst.endpoint {
        Endpoint::Socket(out) | Endpoint::Remote(out) | Endpoint::Shard(out) => {
            out.push(|b| {
                crate::frames::request(
                    b,
                    &cumulo_proto::Request {
                        trans_id: r.trans_id,
                        timeout,
                        priority: r.priority,
                        flags,
                        source,
                        name: r.name,
                        pattern,
                        request_info: r.request_info,
                        request: r.request,
                    },
                )
            });
        }
        Endpoint::Internal(inbox) => {
            inbox.push(r.to_owned(Some(Rc::from(pattern))));
        }
    }
}
