//! Who else is in the cloud: one `Member` per remote node, each represented
//! in the local core by a pseudo-instance subscribed to that node's patterns,
//! so that routing picks among local instances and remote nodes alike.

use super::wire::Control;
use ahash::AHashMap;
use cumulo_config::ServiceOptions;
use cumulo_router::Core;
use cumulo_router::InstanceId;
use cumulo_router::Outbox;
use cumulo_router::ServiceMetrics;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

/// Most remote nodes one node keeps: each costs a pseudo-instance, its
/// subscriptions and a writer task.
pub const MAX_NODES: usize = 256;
/// Most distinct patterns kept per remote node; more are ignored (logged).
pub const MAX_REMOTE_PATTERNS: usize = 10_000;
/// Most subscriptions (pattern × instance count) kept per remote node: each
/// is one registry entry; counts beyond are clamped.
pub const MAX_REMOTE_SUBSCRIPTIONS: u32 = 65_536;
// A multicast makes one copy per subscription of a node: to every instance
// of a node, it fits the node's queue (`ServiceOptions::node`).
const _: () = assert!(cumulo_config::NODE_QUEUE_LIMIT >= MAX_REMOTE_SUBSCRIPTIONS);
/// Longest remote pattern kept, bytes (as long as a local one may be useful).
pub const MAX_REMOTE_PATTERN_LEN: usize = 1024;

/// A remote node as this node knows it.
pub struct Member {
    pub(crate) name: Rc<str>,
    pub(crate) node_id: u32,
    pub(crate) boot: u64,
    /// Its pseudo-instance in the local core.
    pub(crate) instance: InstanceId,
    pub(crate) outbox: Rc<Outbox>,
    pub(crate) metrics: Rc<ServiceMetrics>,
    pub(crate) last_seen: Instant,
    pub(crate) joined_at: SystemTime,
    /// The subscription version it announced, and the one applied here.
    pub(crate) announced: u64,
    pub(crate) applied_version: u64,
    /// pattern → instance count, as subscribed here under `instance`.
    pub(crate) applied: AHashMap<String, u32>,
}

impl Member {
    /// Subscriptions of its instances applied here (a pattern once per
    /// instance that subscribes it).
    pub fn subscriptions(&self) -> u32 {
        self.applied.values().sum()
    }
    /// Patterns of it applied here.
    pub fn patterns(&self) -> usize {
        self.applied.len()
    }
    /// The node's name and id.
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn node_id(&self) -> u32 {
        self.node_id
    }
    /// Its pseudo-instance in the local core.
    pub fn instance(&self) -> InstanceId {
        self.instance
    }
    /// Requests sent to it and their answers.
    pub fn metrics(&self) -> &ServiceMetrics {
        &self.metrics
    }
    /// When it was last heard from, and when it joined.
    pub fn last_seen(&self) -> Instant {
        self.last_seen
    }
    pub fn joined_at(&self) -> SystemTime {
        self.joined_at
    }
    /// The version of its subscriptions applied here.
    pub fn applied_version(&self) -> u64 {
        self.applied_version
    }
}

/// This node and the others.
pub struct Membership {
    pub(crate) me: Rc<str>,
    pub(crate) node_id: u32,
    pub(crate) boot: u64,
    pub(crate) cloud: String,
    pub(crate) servers: Vec<String>,
    /// Connected to a NATS server now.
    pub(crate) connected: bool,
    /// This node's subscription snapshot and its version.
    pub(crate) local: BTreeMap<String, u32>,
    pub(crate) local_version: u64,
    pub(crate) members: BTreeMap<Rc<str>, Member>,
    /// Nodes that left or were purged; data messages dropped (from unknown
    /// nodes, or unreadable).
    pub(crate) left: u64,
    pub(crate) purged: u64,
    pub(crate) dropped_frames: u64,
    /// A NATS client: one per core, for the writer tasks (set once connected).
    pub(crate) max_payload: usize,
}

/// What a node said that this node refuses to act on.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    Itself,
    SameName,
    SameNodeId(String),
    TooMany,
}

impl Membership {
    /// This node's name, the cloud's, and the NATS servers it was given.
    pub fn me(&self) -> &str {
        &self.me
    }
    pub fn cloud(&self) -> &str {
        &self.cloud
    }
    pub fn servers(&self) -> &[String] {
        &self.servers
    }
    /// Connected to a NATS server now.
    pub fn connected(&self) -> bool {
        self.connected
    }
    /// The largest NATS message the server takes.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }
    /// This node's subscriptions as the others see them: subscriptions
    /// (counted once per instance) and patterns.
    pub fn local_subscriptions(&self) -> u32 {
        self.local.values().sum()
    }
    pub fn local_patterns(&self) -> usize {
        self.local.len()
    }
    /// The other nodes, by name.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }
    /// Nodes that left, nodes purged (silent too long), data messages
    /// dropped (from unknown nodes, or unreadable).
    pub fn left(&self) -> u64 {
        self.left
    }
    pub fn purged(&self) -> u64 {
        self.purged
    }
    pub fn dropped_frames(&self) -> u64 {
        self.dropped_frames
    }

    pub fn new(me: String, node_id: u32, cloud: String, servers: Vec<String>) -> Membership {
        Membership {
            me: Rc::from(me),
            node_id,
            // Random, so that a restarted node is told from its old self.
            boot: fastrand::u64(1..),
            cloud,
            servers,
            connected: false,
            local: BTreeMap::new(),
            local_version: 0,
            members: BTreeMap::new(),
            left: 0,
            purged: 0,
            dropped_frames: 0,
            max_payload: 1024 * 1024,
        }
    }

    pub fn heartbeat(&self) -> Control {
        Control::Heartbeat {
            node: self.me.to_string(),
            node_id: self.node_id,
            boot: self.boot,
            version: self.local_version,
        }
    }

    pub fn state(&self) -> Control {
        Control::State {
            node: self.me.to_string(),
            node_id: self.node_id,
            boot: self.boot,
            version: self.local_version,
            patterns: self.local.iter().map(|(p, n)| (p.clone(), *n)).collect(),
        }
    }

    /// Checks a node's identity against this node and the known ones.
    pub fn check(&self, node: &str, node_id: u32, boot: u64) -> Result<(), Refused> {
        if node == &*self.me {
            return Err(if boot == self.boot { Refused::Itself } else { Refused::SameName });
        }
        if node_id == self.node_id {
            return Err(Refused::SameNodeId(format!("node '{node}' has this node's core.node_id {node_id}")));
        }
        if let Some(other) = self.members.values().find(|m| m.node_id == node_id && &*m.name != node) {
            return Err(Refused::SameNodeId(format!(
                "node '{node}' has core.node_id {node_id}, as node '{}' does",
                other.name
            )));
        }
        if !self.members.contains_key(node) && self.members.len() >= MAX_NODES {
            return Err(Refused::TooMany);
        }
        Ok(())
    }

    /// The member for a node heard from now, created if new (or restarted).
    /// Returns it and whether it just joined.
    pub fn touch(&mut self, core: &mut Core, node: &str, node_id: u32, boot: u64) -> (&mut Member, bool) {
        let now = Instant::now();
        let restarted = self.members.get(node).is_some_and(|m| m.boot != boot || m.node_id != node_id);
        if restarted {
            self.remove(core, node, "it restarted");
        }
        let joined = !self.members.contains_key(node);
        if joined {
            let name: Rc<str> = Rc::from(node);
            // Requests from another node are served here, never sent on: a
            // request crosses at most one hop (forwarding aside).
            let options = Rc::new(ServiceOptions::node());
            let metrics = Rc::new(ServiceMetrics::default());
            // The outbox limit: what may wait for the writer task, as for a
            // socket; a node that far behind is treated as gone.
            let outbox = Outbox::new(core.limits().max_outbox);
            let instance = core.admit_remote(format!("node {node}"), options, metrics.clone(), outbox.clone());
            tracing::info!(node = node, node_id, "node {node} joined the cloud '{}'", self.cloud);
            let m = Member {
                name: name.clone(),
                node_id,
                boot,
                instance,
                outbox,
                metrics,
                last_seen: now,
                joined_at: SystemTime::now(),
                announced: 0,
                applied_version: 0,
                applied: AHashMap::new(),
            };
            self.members.insert(name, m);
        }
        let m = self.members.get_mut(node).unwrap();
        m.last_seen = now;
        (m, joined)
    }

    /// Forgets a node: its pseudo-instance goes, so what was delivered to it
    /// fails with CRASHED now (naming the node and `why`) and what was queued
    /// for it is routed again (to a local instance or another node).
    pub fn remove(&mut self, core: &mut Core, node: &str, why: &str) -> bool {
        let Some(m) = self.members.remove(node) else { return false };
        core.refresh_now();
        core.remove_instance(m.instance, why);
        m.outbox.close();
        true
    }

    /// Forgets every node (the NATS connection is lost).
    pub fn remove_all(&mut self, core: &mut Core, why: &str) {
        let names: Vec<Rc<str>> = self.members.keys().cloned().collect();
        for n in names {
            tracing::warn!(node = &*n, "node {n} left the cloud: {why}");
            self.remove(core, &n, why);
            self.left += 1;
        }
    }

    /// Purges nodes silent for longer than `purge`; returns their names.
    pub fn purge(&mut self, core: &mut Core, purge: std::time::Duration) -> Vec<Rc<str>> {
        let now = Instant::now();
        let silent: Vec<Rc<str>> = self
            .members
            .values()
            .filter(|m| now.saturating_duration_since(m.last_seen) > purge)
            .map(|m| m.name.clone())
            .collect();
        for n in &silent {
            let why = format!("node {n} was silent for {} ms: purged", purge.as_millis());
            tracing::warn!(node = &**n, "{why}");
            self.remove(core, n, &why);
            self.purged += 1;
        }
        silent
    }

    /// Frees the window places of requests to other nodes that ended here
    /// (timed out) while their answer never came (a message NATS lost): a
    /// remote node's answer is not guaranteed as a local instance's is.
    pub fn sweep(&self, core: &mut Core) {
        for m in self.members.values() {
            core.forget_answered(m.instance);
        }
    }

    /// Applies a node's snapshot: subscribes or unsubscribes its
    /// pseudo-instance so that each pattern has the node's instance count.
    /// Patterns are validated as local ones are; what is over the limits is
    /// ignored, with one warning.
    pub fn apply_state(&mut self, core: &mut Core, node: &str, version: u64, patterns: Vec<(String, u32)>) {
        let Some(m) = self.members.get_mut(node) else { return };
        let mut wanted: AHashMap<String, u32> = AHashMap::new();
        let mut total = 0u32;
        let mut refused = Vec::new();
        for (p, n) in patterns {
            if wanted.len() >= MAX_REMOTE_PATTERNS || total >= MAX_REMOTE_SUBSCRIPTIONS {
                refused.push(format!("{p} (over the limits of {MAX_REMOTE_PATTERNS} patterns, {MAX_REMOTE_SUBSCRIPTIONS} subscriptions per node)"));
                continue;
            }
            if p.len() > MAX_REMOTE_PATTERN_LEN || !p.starts_with('/') {
                refused.push(format!("{p} (must start with '/', at most {MAX_REMOTE_PATTERN_LEN} bytes)"));
                continue;
            }
            // The local limits too (max_pattern, max_wildcards): a pattern
            // over them would be refused by `subscribe` below, unseen.
            if let Err(why) = core.limits().names.check_pattern(&p) {
                refused.push(format!("{p} ({why})"));
                continue;
            }
            let n = n.min(MAX_REMOTE_SUBSCRIPTIONS - total);
            total += n;
            if n > 0 {
                *wanted.entry(p).or_default() += n;
            }
        }
        if !refused.is_empty() {
            tracing::warn!(node, "node {node}: {} remote patterns ignored, e.g. {}", refused.len(), refused[0]);
        }
        core.refresh_now();
        sync_subscriptions(core, m.instance, &mut m.applied, wanted, &format!("node {node}"));
        m.applied_version = version;
        m.announced = m.announced.max(version);
        tracing::debug!(node, "node {node}: subscriptions at version {version} ({} patterns)", m.applied.len());
    }

    /// This node's own subscriptions (local instances only, not the
    /// pseudo-instances of other nodes): pattern → instance count.
    pub fn snapshot(core: &Core) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for e in core.registry().patterns() {
            let n = e
                .instances
                .iter()
                .filter(|id| {
                    core.instance(id).is_some_and(|i| !matches!(i.endpoint(), cumulo_router::Endpoint::Remote(_)))
                })
                .count() as u32;
            if n > 0 {
                out.insert(e.pattern.to_string(), n);
            }
        }
        out
    }
}

/// Subscribes or unsubscribes pseudo-instance `id` so that each pattern of
/// `wanted` has its count (`applied` is what it holds, kept up to date).
/// `peer` names the node or shard in warnings.
pub fn sync_subscriptions(
    core: &mut Core,
    id: InstanceId,
    applied: &mut AHashMap<String, u32>,
    wanted: AHashMap<String, u32>,
    peer: &str,
) {
    for (p, have) in applied.iter_mut() {
        let want = wanted.get(p).copied().unwrap_or(0);
        while *have > want {
            let _ = core.unsubscribe(id, p);
            *have -= 1;
        }
    }
    applied.retain(|_, n| *n > 0);
    for (p, want) in wanted {
        let have = applied.entry(p.clone()).or_default();
        while *have < want {
            if let Err(cumulo_router::RouteError { why, .. }) = core.subscribe(id, &p) {
                tracing::warn!("{peer}: pattern {p} not subscribed: {why}");
                break;
            }
            *have += 1;
        }
    }
    applied.retain(|_, n| *n > 0);
}
