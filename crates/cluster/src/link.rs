//! The cluster task: the NATS connection, the control plane (heartbeats,
//! snapshots, purges) and the data plane (one writer task per remote node,
//! one subscription for this node's frames).

use super::members::{Membership, Refused};
use super::wire::{self, Control, Piece};
use async_nats::{Client, ConnectOptions, Event};
use bytes::{BufMut, Bytes, BytesMut};
use cumulo_config::cluster::ClusterConfig;
use cumulo_proto::{Frame, Return, Status};
use cumulo_router::InstanceId;
use cumulo_router::Outbox;
use cumulo_router::Shared;
use futures_util::StreamExt;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How often this node's subscriptions are compared with the last snapshot
/// sent, ms: a change reaches the others within this plus one NATS hop.
pub const DEBOUNCE_MS: u64 = 50;
/// Control messages waiting for the NATS client, at most: heartbeats and
/// snapshots are re-sent anyway, so when the client is stuck (no server)
/// the newest matter and older ones are dropped.
const CONTROL_QUEUE: usize = 64;
/// Longest pause between reconnect attempts, ms: a NATS server that comes
/// back is found within this.
const MAX_RECONNECT_DELAY_MS: u64 = 1_000;
/// At most one identity-conflict error per this many seconds in the log.
const CONFLICT_LOG_EVERY: Duration = Duration::from_secs(10);

/// The cluster as the rest of the daemon sees it.
pub struct Cluster {
    client: Client,
    membership: Rc<RefCell<Membership>>,
}

/// Builds the NATS client options from the config; every key set is passed on.
async fn options(
    cfg: &ClusterConfig,
    me: &str,
    events: mpsc::UnboundedSender<Event>,
) -> anyhow::Result<ConnectOptions> {
    let mut o = match &cfg.creds_file {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| anyhow::anyhow!("cluster.creds_file {}: {e}", path.display()))?,
        None => ConnectOptions::new(),
    };
    if let (Some(u), Some(p)) = (&cfg.user, &cfg.password) {
        o = o.user_and_password(u.clone(), p.clone());
    }
    if let Some(t) = &cfg.token {
        o = o.token(t.clone());
    }
    if cfg.tls_required {
        o = o.require_tls(true);
    }
    if let Some(ca) = &cfg.tls_ca_file {
        o = o.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&cfg.tls_cert_file, &cfg.tls_key_file) {
        o = o.add_client_certificate(cert.clone(), key.clone());
    }
    // A dead server is noticed by its pings within about the purge time, so
    // a silent partition and a silent node are found alike.
    let ping = Duration::from_millis((cfg.purge_ms / 2).max(100) as u64);
    Ok(o.name(format!("cumulo {me}"))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .ping_interval(ping)
        .connection_timeout(Duration::from_millis(cfg.purge_ms.max(1000) as u64))
        .reconnect_delay_callback(|attempts| Duration::from_millis((attempts as u64 * 100).min(MAX_RECONNECT_DELAY_MS)))
        .event_callback(move |ev| {
            let events = events.clone();
            async move {
                let _ = events.send(ev);
            }
        }))
}

/// Connects (in the background: the core starts even when no NATS server is
/// up) and spawns the cluster task. Fails only on a config it cannot use.
pub async fn start(cfg: &ClusterConfig, me: String, core: Shared) -> anyhow::Result<Cluster> {
    let node_id = core.borrow().limits().node_id;
    let membership = Rc::new(RefCell::new(Membership::new(me.clone(), node_id, cfg.name.clone(), cfg.servers.clone())));
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let client = options(cfg, &me, ev_tx).await?.connect(cfg.servers.clone()).await?;
    let ctl = client.subscribe(wire::control_subject(&cfg.name)).await?;
    let data = client.subscribe(wire::data_subject(&cfg.name, &me)).await?;
    core.borrow_mut().set_clustered();
    tracing::info!("cluster: node '{me}' of cloud '{}' over NATS {}", cfg.name, cfg.servers.join(", "));
    let task = Task {
        client: client.clone(),
        core,
        membership: membership.clone(),
        cloud: cfg.name.clone(),
        heartbeat: Duration::from_millis(cfg.heartbeat_ms as u64),
        purge: Duration::from_millis(cfg.purge_ms as u64),
        control: spawn_control_writer(client.clone(), wire::control_subject(&cfg.name)),
        last_conflict_log: None,
        state_wanted: false,
    };
    tokio::task::spawn_local(task.run(ctl, data, ev_rx));
    Ok(Cluster { client, membership })
}

impl Cluster {
    /// This node and the others, as the admin API and `/metrics` read them.
    pub fn membership(&self) -> Rc<RefCell<Membership>> {
        self.membership.clone()
    }

    /// Tells the others this node is leaving (they forget it at once instead
    /// of at purge time), and waits briefly for it to leave.
    pub async fn leave(&self) {
        let (node, boot, subject) = {
            let m = self.membership.borrow();
            (m.me.to_string(), m.boot, wire::control_subject(&m.cloud))
        };
        let bye = Control::Bye { node, boot };
        let send = async {
            let _ = self.client.publish(subject, bye.encode().into()).await;
            let _ = self.client.flush().await;
        };
        let _ = tokio::time::timeout(Duration::from_millis(500), send).await;
    }
}

/// A task that publishes control messages in order; `try_send` to it never
/// blocks the cluster task.
fn spawn_control_writer(client: Client, subject: String) -> mpsc::Sender<Control> {
    let (tx, mut rx) = mpsc::channel::<Control>(CONTROL_QUEUE);
    tokio::task::spawn_local(async move {
        while let Some(c) = rx.recv().await {
            if let Err(e) = client.publish(subject.clone(), c.encode().into()).await {
                tracing::debug!("cluster: control message not sent: {e}");
            }
        }
    });
    tx
}

struct Task {
    client: Client,
    core: Shared,
    membership: Rc<RefCell<Membership>>,
    cloud: String,
    heartbeat: Duration,
    purge: Duration,
    control: mpsc::Sender<Control>,
    last_conflict_log: Option<Instant>,
    /// This node's snapshot is to be published at the next debounce tick.
    state_wanted: bool,
}

impl Task {
    fn say(&self, c: Control) {
        if self.control.try_send(c).is_err() {
            tracing::debug!("cluster: control queue full (NATS unreachable?): message dropped");
        }
    }

    async fn run(
        mut self,
        mut ctl: async_nats::Subscriber,
        mut data: async_nats::Subscriber,
        mut events: mpsc::UnboundedReceiver<Event>,
    ) {
        let mut hb = tokio::time::interval(self.heartbeat);
        hb.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut debounce = tokio::time::interval(Duration::from_millis(DEBOUNCE_MS));
        debounce.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = hb.tick() => self.on_heartbeat_tick(),
                _ = debounce.tick() => self.on_debounce_tick(),
                m = ctl.next() => match m {
                    Some(m) => self.on_control(&m.payload),
                    None => break,
                },
                m = data.next() => match m {
                    Some(m) => self.on_data(&m.payload),
                    None => break,
                },
                Some(ev) = events.recv() => self.on_event(ev),
            }
        }
        tracing::error!("cluster: the NATS client closed: this node is on its own now");
        let mut core = self.core.borrow_mut();
        self.membership.borrow_mut().remove_all(&mut core, "the NATS client closed");
    }

    fn on_heartbeat_tick(&mut self) {
        let hb = self.membership.borrow().heartbeat();
        self.say(hb);
        let mut core = self.core.borrow_mut();
        let mut m = self.membership.borrow_mut();
        m.purge(&mut core, self.purge);
        m.sweep(&mut core);
    }

    /// Publishes this node's snapshot when its subscriptions changed.
    fn on_debounce_tick(&mut self) {
        let snap = super::members::Membership::snapshot(&self.core.borrow());
        let mut m = self.membership.borrow_mut();
        if snap != m.local || m.local_version == 0 {
            m.local = snap;
            m.local_version += 1;
            self.state_wanted = true;
        }
        if std::mem::take(&mut self.state_wanted) {
            let state = m.state();
            drop(m);
            self.say(state);
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Connected => {
                let mut m = self.membership.borrow_mut();
                m.connected = true;
                let max = self.client.server_info().max_payload;
                if max > 0 {
                    m.max_payload = max;
                }
                tracing::info!("cluster: connected to NATS (max_payload {} bytes)", m.max_payload);
                let (hb, state) = (m.heartbeat(), m.state());
                drop(m);
                self.say(hb);
                self.say(state);
            }
            Event::Disconnected => {
                tracing::warn!("cluster: NATS connection lost: other nodes are unreachable until it is back");
                let mut core = self.core.borrow_mut();
                let mut m = self.membership.borrow_mut();
                m.connected = false;
                m.remove_all(&mut core, "the connection to NATS was lost");
                // A new incarnation: nodes that still know the old one fail
                // what they had in flight here at once, rather than at its
                // timeout, since its answers may be lost.
                m.boot = fastrand::u64(1..);
            }
            other => tracing::info!("cluster: NATS {other}"),
        }
    }

    fn conflict(&mut self, why: String) {
        let now = Instant::now();
        if self.last_conflict_log.is_none_or(|t| now.duration_since(t) >= CONFLICT_LOG_EVERY) {
            self.last_conflict_log = Some(now);
            tracing::error!(
                "cluster: {why}: ignoring it (each node of a cloud needs its own node name and core.node_id)"
            );
        }
    }

    fn on_control(&mut self, payload: &[u8]) {
        let Some(c) = Control::decode(payload) else {
            tracing::debug!("cluster: unreadable control message ({} bytes) ignored", payload.len());
            return;
        };
        let (node, node_id, boot) = match &c {
            Control::Heartbeat { node, node_id, boot, .. } | Control::State { node, node_id, boot, .. } => {
                (node.clone(), *node_id, *boot)
            }
            Control::Want { node } => {
                // Answered at the next debounce tick, once however many
                // nodes asked: a flood of requests costs one snapshot per tick.
                if *node == *self.membership.borrow().me {
                    self.state_wanted = true;
                }
                return;
            }
            Control::Bye { node, boot } => {
                let mut core = self.core.borrow_mut();
                let mut m = self.membership.borrow_mut();
                if m.members.get(node.as_str()).is_some_and(|x| x.boot == *boot) {
                    tracing::info!(node = node.as_str(), "node {node} left the cloud (stopped)");
                    m.remove(&mut core, node, &format!("node {node} stopped"));
                    m.left += 1;
                }
                return;
            }
        };
        if !cumulo_config::cluster::valid_name(&node) {
            return;
        }
        let check = self.membership.borrow().check(&node, node_id, boot);
        match check {
            Ok(()) => {}
            Err(Refused::Itself) => return,
            Err(Refused::SameName) => return self.conflict(format!("another node is named '{node}' as this one is")),
            Err(Refused::SameNodeId(why)) => return self.conflict(why),
            Err(Refused::TooMany) => {
                return self.conflict(format!("node '{node}' is over the limit of {} nodes", super::members::MAX_NODES))
            }
        }
        let mut core = self.core.borrow_mut();
        let mut m = self.membership.borrow_mut();
        let hello = m.heartbeat();
        let (member, joined) = m.touch(&mut core, &node, node_id, boot);
        if joined {
            // Announce at once, so that the new node knows this one before
            // any request from here reaches it (one connection keeps order).
            self.say(hello);
            let subject = wire::data_subject(&self.cloud, &node);
            tokio::task::spawn_local(writer(
                self.client.clone(),
                subject,
                self.core.clone(),
                self.membership.clone(),
                member.instance,
                member.outbox.clone(),
            ));
        }
        match c {
            Control::Heartbeat { version, .. } => {
                member.announced = version;
                if version != member.applied_version {
                    drop(m);
                    drop(core);
                    self.say(Control::Want { node });
                }
            }
            Control::State { version, patterns, .. } => m.apply_state(&mut core, &node, version, patterns),
            _ => {}
        }
    }

    /// Frames from another node: REQUESTs to serve here, RESPONSEs to
    /// requests this node sent there.
    fn on_data(&mut self, payload: &[u8]) {
        let Some((node, boot, frames)) = wire::parse_data(payload) else {
            return;
        };
        let mut m = self.membership.borrow_mut();
        let Some(member) = m.members.get_mut(node).filter(|x| x.boot == boot) else {
            // From a node not (or no longer) known here (it heard of this
            // node before this node heard of it): its requests are refused
            // at once rather than left to their timeout on its side. It
            // knows this node, so it takes the answers.
            m.dropped_frames += 1;
            let header = wire::data_header(&m.me, m.boot);
            drop(m);
            self.refuse_unknown(node, frames, header);
            return;
        };
        member.last_seen = Instant::now();
        let from = member.instance;
        drop(m);
        let mut core = self.core.borrow_mut();
        core.refresh_now();
        let mut at = 0;
        while let Ok(Some(n)) = cumulo_proto::next_frame_len(&frames[at..], u32::MAX) {
            let frame = &frames[at + cumulo_proto::LEN_PREFIX..at + n];
            at += n;
            match cumulo_proto::decode(frame) {
                Ok(Frame::Request(r)) => cumulo_router::accept_remote(&mut core, from, &r),
                Ok(Frame::Response(r)) => {
                    core.ret(from, &r);
                }
                Ok(other) => {
                    tracing::debug!("cluster: {} from node {node} ignored", other.type_name())
                }
                Err(e) => {
                    // Counted, not logged each time: a broken peer could
                    // otherwise fill the log at its message rate.
                    tracing::debug!("cluster: bad frame from node {node}: {e}");
                    self.membership.borrow_mut().dropped_frames += 1;
                    break;
                }
            }
        }
    }
}

impl Task {
    /// Answers every REQUEST in `frames` from a node not known here with
    /// `NO_SERVICE`, published back to that node.
    fn refuse_unknown(&self, node: &str, frames: &[u8], header: Vec<u8>) {
        if !cumulo_config::cluster::valid_name(node) {
            return;
        }
        let msg = format!(
            "node {} does not know node {node} yet (it joined less than a heartbeat ago): retry",
            self.membership.borrow().me
        );
        let mut out = BytesMut::from(&header[..]);
        let mut at = 0;
        while let Ok(Some(n)) = cumulo_proto::next_frame_len(&frames[at..], u32::MAX) {
            if let Ok(Frame::Request(r)) = cumulo_proto::decode(&frames[at + cumulo_proto::LEN_PREFIX..at + n]) {
                let mut b = Vec::new();
                cumulo_router::frames::response(&mut b, r.trans_id, Status::NoService, b"", msg.as_bytes());
                out.put_slice(&b);
            }
            at += n;
        }
        if out.len() > header.len() {
            let (client, subject) = (self.client.clone(), wire::data_subject(&self.cloud, node));
            tokio::task::spawn_local(async move {
                let _ = client.publish(subject, out.freeze()).await;
            });
        }
    }
}

/// Publishes what the core routed to one remote node, batch by batch, until
/// the node is removed (its outbox closed).
async fn writer(
    client: Client,
    subject: String,
    core: Shared,
    membership: Rc<RefCell<Membership>>,
    instance: InstanceId,
    outbox: Rc<Outbox>,
) {
    let mut buf = Vec::with_capacity(64 * 1024);
    while outbox.next_batch(&mut buf).await {
        let (header, max_payload) = {
            let m = membership.borrow();
            (wire::data_header(&m.me, m.boot), m.max_payload)
        };
        let max = max_payload.saturating_sub(header.len());
        for piece in wire::split_frames(&buf, max) {
            match piece {
                Piece::Fits(range) => {
                    let mut msg = BytesMut::with_capacity(header.len() + range.len());
                    msg.put_slice(&header);
                    msg.put_slice(&buf[range]);
                    if let Err(e) = client.publish(subject.clone(), msg.freeze()).await {
                        tracing::debug!("cluster: publish to {subject} failed: {e}");
                    }
                }
                Piece::TooLarge(range) => {
                    let refused = too_large(&core, instance, &buf[range], max_payload, &subject);
                    if let Some(frame) = refused {
                        let mut msg = BytesMut::with_capacity(header.len() + frame.len());
                        msg.put_slice(&header);
                        msg.put_slice(&frame);
                        let _ = client.publish(subject.clone(), msg.freeze()).await;
                    }
                }
            }
        }
        buf.clear();
    }
}

/// A frame over NATS's max_payload cannot cross: a REQUEST ends at once with
/// TOO_LARGE for its sender here; a RESPONSE is replaced by a TOO_LARGE one
/// (returned, to be sent instead).
fn too_large(core: &Shared, instance: InstanceId, frame: &[u8], max_payload: usize, subject: &str) -> Option<Bytes> {
    let body = frame.get(cumulo_proto::LEN_PREFIX..)?;
    let why = |what: &str| {
        format!(
            "the {what} ({} bytes framed) is over the NATS max_payload ({max_payload} bytes) between nodes ({subject}): \
             send it in smaller parts",
            frame.len()
        )
    };
    match cumulo_proto::decode(body) {
        Ok(Frame::Request(r)) => {
            let msg = why("request");
            tracing::warn!("cluster: {msg}");
            let mut core = core.borrow_mut();
            core.refresh_now();
            let refusal = Return {
                trans_id: r.trans_id,
                status: Status::TooLarge.code(),
                response_info: b"",
                response: msg.as_bytes(),
            };
            core.ret(instance, &refusal);
            None
        }
        Ok(Frame::Response(r)) => {
            let msg = why("response");
            tracing::warn!("cluster: {msg}");
            let mut out = Vec::new();
            cumulo_router::frames::response(&mut out, r.trans_id, Status::TooLarge, b"", msg.as_bytes());
            Some(out.into())
        }
        _ => None,
    }
}
