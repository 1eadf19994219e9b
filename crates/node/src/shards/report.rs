//! One view of every shard: the admin API (on shard 0) asks every other
//! shard for a report (`Message::Report`) and adds them up with its own.
//!
//! A report is a copy of the shard's counters in plain integers (`Send`):
//! its `Stats`, per service what its instances there counted, and its
//! instances. Shard 0 sends every other shard the question at once and
//! waits for the answers until one deadline (`REPORT_TIMEOUT`); a shard
//! that has not answered by then is named missing, the answer never hangs.
//! At most one question waits at a shard: a later call waits for the same
//! answer rather than asking again, and calls take turns.
//!
//! A request that crosses shards is counted by both (each accepts it and
//! routes it); a report counts it once: `requests` on the shard it entered
//! (the one that received it from outside), `responses` on the shard whose
//! instance answered, requests in flight on the sender's shard.

use super::{Envelope, Message};
use cumulo_router::Core;
use cumulo_router::InstanceId;
use cumulo_router::{BreakerReport, EjectedReport, ResilienceReport, ResilienceStats};
use cumulo_router::{Endpoint, ServiceId};
use cumulo_router::{ServiceCounts, ServiceMetrics, Stats};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How long the admin API waits for the other shards' reports. A shard
/// answers between two batches of its work, so an answer later than this
/// means a shard stuck or far behind: better said than waited for.
pub const REPORT_TIMEOUT: Duration = Duration::from_millis(500);

/// What one shard reports.
#[derive(Debug, Clone, Default)]
pub struct ShardReport {
    pub shard: u32,
    /// Its counters, a request that crossed shards counted once (see the
    /// module's comment).
    pub stats: Stats,
    /// Requests in flight that this shard sends (not those another shard
    /// sent it, which that shard counts).
    pub in_flight: u64,
    /// Requests waiting in the shard for one of its instances.
    pub queued: u64,
    /// Instances connected (internal ones included, other shards and nodes
    /// not).
    pub connections: u64,
    /// Per service (None: unmanaged instances).
    pub services: Vec<ServiceReport>,
    pub instances: Vec<InstanceReport>,
    /// Its breakers, ejections and retry counters (None: no policy).
    pub resilience: Option<ResilienceReport>,
}

/// What a service's instances counted on one shard.
#[derive(Debug, Clone, Default)]
pub struct ServiceReport {
    pub id: Option<ServiceId>,
    pub counts: ServiceCounts,
    /// Its instances connected to the shard, and requests queued at them.
    pub instances: u64,
    pub queued: u64,
}

/// One instance, as the admin views show one.
#[derive(Debug, Clone)]
pub struct InstanceReport {
    pub id: InstanceId,
    pub service: Option<ServiceId>,
    pub process_index: Option<u32>,
    pub label: String,
    /// Requests delivered to it and not answered yet.
    pub handling: u64,
    pub queued: u64,
}

/// The report of `core`, shard `shard`. `services` are the counters the
/// shard keeps per service beyond its instances' lifetimes (shard 0: the
/// supervisor's; the others: their gateways'); the counters of instances of
/// other services are added once each (instances of a service share them).
pub fn snapshot(core: &Core, shard: u32, services: &[(ServiceId, Rc<ServiceMetrics>)]) -> ShardReport {
    let mut report = ShardReport { shard, stats: core.stats().clone(), ..ShardReport::default() };
    let mut by_service = ByService::default();
    for (id, metrics) in services {
        by_service.entry(Some(*id), metrics);
    }
    by_service.entry(None, core.unmanaged_metrics());
    let mut shard_pseudo = Vec::new();
    for inst in core.instances() {
        match inst.endpoint() {
            Endpoint::Shard(_) => {
                // Requests another shard sent here were counted there as they
                // entered; answers that came back from it were counted there
                // by the instance that gave them.
                let m = inst.metrics();
                report.stats.requests = report.stats.requests.saturating_sub(m.sent.get());
                report.stats.responses = report.stats.responses.saturating_sub(m.handled());
                shard_pseudo.push(inst.id());
            }
            Endpoint::Remote(_) => {}
            _ => {
                let service = inst.origin().map(|o| o.service);
                let queued = inst.queued() as u64;
                let s = by_service.entry(service, inst.metrics());
                s.instances += 1;
                s.queued += queued;
                report.queued += queued;
                report.instances.push(InstanceReport {
                    id: inst.id(),
                    service,
                    process_index: inst.origin().map(|o| o.process_index),
                    label: inst.label().to_string(),
                    handling: inst.in_flight() as u64,
                    queued,
                });
            }
        }
    }
    report.in_flight = if shard_pseudo.is_empty() {
        core.in_flight() as u64
    } else {
        core.in_flight_senders().filter(|s| !shard_pseudo.contains(s)).count() as u64
    };
    report.connections = core.connections() as u64;
    report.instances.sort_by_key(|i| i.id);
    report.services = by_service.services;
    report.resilience = core.resilience_report();
    report
}

/// Per service, each set of counters added once (a service's instances
/// share theirs).
#[derive(Default)]
struct ByService {
    services: Vec<ServiceReport>,
    at: ahash::AHashMap<Option<ServiceId>, usize>,
    seen: ahash::AHashSet<*const ServiceMetrics>,
}

impl ByService {
    fn entry(&mut self, id: Option<ServiceId>, metrics: &Rc<ServiceMetrics>) -> &mut ServiceReport {
        let services = &mut self.services;
        let at = *self.at.entry(id).or_insert_with(|| {
            services.push(ServiceReport { id, ..ServiceReport::default() });
            services.len() - 1
        });
        if self.seen.insert(Rc::as_ptr(metrics)) {
            self.services[at].counts.add(&metrics.counts());
        }
        &mut self.services[at]
    }
}

/// Every shard's report, and the shards that did not answer in time.
#[derive(Debug, Clone, Default)]
pub struct Reports {
    /// In shard order, this one first.
    pub shards: Vec<ShardReport>,
    pub missing: Vec<u32>,
}

impl Reports {
    /// The core's counters: every shard's added up.
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for r in &self.shards {
            total.add(&r.stats);
        }
        total
    }

    pub fn in_flight(&self) -> u64 {
        self.shards.iter().map(|r| r.in_flight).sum()
    }

    pub fn queued(&self) -> u64 {
        self.shards.iter().map(|r| r.queued).sum()
    }

    pub fn connections(&self) -> u64 {
        self.shards.iter().map(|r| r.connections).sum()
    }

    /// The policies' figures over every shard; None when no shard has a
    /// policy.
    pub fn resilience(&self) -> Option<ResilienceTotals> {
        let mut total: Option<ResilienceTotals> = None;
        for r in &self.shards {
            let Some(mine) = &r.resilience else { continue };
            let t = total.get_or_insert_with(ResilienceTotals::default);
            add_stats(&mut t.stats, &mine.stats);
            t.breakers.extend(mine.breakers.iter().map(|b| (r.shard, b.clone())));
            t.ejected.extend(mine.ejected.iter().map(|e| (r.shard, e.clone())));
            t.waiting += mine.waiting;
        }
        total
    }

    /// A service's counters over every shard, its instances and the
    /// requests queued at them (None: unmanaged instances).
    pub fn service(&self, id: Option<ServiceId>) -> ServiceReport {
        let mut total = ServiceReport { id, ..ServiceReport::default() };
        for s in self.shards.iter().flat_map(|r| &r.services).filter(|s| s.id == id) {
            total.counts.add(&s.counts);
            total.instances += s.instances;
            total.queued += s.queued;
        }
        total
    }
}

/// The policies' figures over every shard: counters summed; each breaker
/// and ejected instance with the shard that holds it (shards keep their
/// own).
#[derive(Debug, Clone, Default)]
pub struct ResilienceTotals {
    pub stats: ResilienceStats,
    pub breakers: Vec<(u32, BreakerReport)>,
    pub ejected: Vec<(u32, EjectedReport)>,
    /// Requests waiting out a backoff now.
    pub waiting: u64,
}

fn add_stats(total: &mut ResilienceStats, s: &ResilienceStats) {
    total.retries += s.retries;
    total.recovered += s.recovered;
    total.gave_up += s.gave_up;
    total.refused += s.refused;
    total.trips += s.trips;
    total.ejections += s.ejections;
    total.uncopied += s.uncopied;
}

/// Asks the other shards for their reports; one question at a time.
pub struct Asker {
    me: u32,
    peers: Vec<mpsc::Sender<Envelope>>,
    /// Per shard, the answer still awaited from an earlier call.
    waiting: RefCell<Vec<Option<oneshot::Receiver<ShardReport>>>>,
    /// Calls take turns, so that each shard has one question at most.
    turn: tokio::sync::Mutex<()>,
}

impl Asker {
    pub fn new(me: u32, peers: Vec<mpsc::Sender<Envelope>>) -> Asker {
        let waiting = RefCell::new(peers.iter().map(|_| None).collect());
        Asker { me, peers, waiting, turn: tokio::sync::Mutex::new(()) }
    }

    /// `mine` (this shard's report) and every other shard's, within
    /// `timeout` at most.
    pub async fn gather(&self, mine: ShardReport, timeout: Duration) -> Reports {
        let deadline = Instant::now() + timeout;
        let mut reports = Reports { shards: vec![mine], missing: Vec::new() };
        let others = (0..self.peers.len() as u32).filter(|j| *j != self.me);
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.turn.lock()).await else {
            reports.missing.extend(others);
            return reports;
        };
        // Ask every shard first, then wait for each: the waits overlap.
        let mut asked = Vec::new();
        for j in others {
            let earlier = self.waiting.borrow_mut()[j as usize].take();
            let answer = match earlier {
                Some(mut rx) => match rx.try_recv() {
                    // An earlier question is still waiting there: its answer
                    // will do.
                    Err(oneshot::error::TryRecvError::Empty) => Some(rx),
                    // Answered late, or dropped: ask again.
                    _ => self.ask(j),
                },
                None => self.ask(j),
            };
            asked.push((j, answer));
        }
        for (j, answer) in asked {
            let Some(mut rx) = answer else {
                reports.missing.push(j);
                continue;
            };
            match tokio::time::timeout_at(deadline, &mut rx).await {
                Ok(Ok(report)) => reports.shards.push(report),
                Ok(Err(_)) => reports.missing.push(j), // that shard has stopped
                Err(_) => {
                    self.waiting.borrow_mut()[j as usize] = Some(rx);
                    reports.missing.push(j);
                }
            }
        }
        reports
    }

    /// Puts the question in shard `j`'s inbox; None if it is full (that
    /// shard is far behind) or gone.
    fn ask(&self, j: u32) -> Option<oneshot::Receiver<ShardReport>> {
        let (tx, rx) = oneshot::channel();
        let envelope = Envelope { from: self.me, message: Message::Report(tx) };
        self.peers[j as usize].try_send(envelope).ok().map(|_| rx)
    }
}
