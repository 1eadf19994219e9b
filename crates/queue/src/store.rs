//! The queue's state: every request it holds, in memory, and the log that
//! makes it durable. Memory and log agree: a request is in memory once its
//! `Put` is acknowledged by the log, and every change after that is a
//! record appended before (or as) it takes effect.
//!
//! Ordering: requests are taken by priority (lower first), then by arrival
//! (their id). A failed request waits out its delay without holding back
//! the ones behind it, then takes its old place again.
//!
//! Compaction: the log is a chain of segments; a segment is deleted once no
//! request it holds is still kept, always from the oldest one on (a later
//! segment holds the `Done` of an earlier one's `Put`). A request that pins
//! an old, otherwise drained segment is written again at the head.

use crate::record::{Failure, Record, Stored};
use crate::settings::Settings;
use cumulo_wal::{Log, Position, WalError};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: stored times survive restarts.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Ready,
    /// Waiting until this time (Unix ms) before its next attempt.
    Delayed(u64),
    InFlight,
    Dead,
}

pub struct Entry {
    pub stored: Stored,
    pub state: State,
    /// The segment holding its latest `Put`.
    segment: u64,
}

/// Counters since the queue started (the log's are since it opened).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub enqueued: u64,
    pub duplicates: u64,
    pub refused_full: u64,
    pub delivered: u64,
    pub answered_error: u64,
    pub retried: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub expired: u64,
    pub replayed: u64,
    pub purged: u64,
    pub recovered: u64,
    pub dropped_on_recovery_bytes: u64,
}

#[derive(Default)]
struct Live {
    /// The requests whose latest `Put` is in the segment.
    ids: BTreeSet<u64>,
    bytes: u64,
}

pub struct Store {
    log: Log,
    entries: BTreeMap<u64, Entry>,
    ready: BTreeSet<(i8, u64)>,
    delayed: BTreeSet<(u64, u64)>,
    dead: BTreeSet<u64>,
    in_flight: u32,
    live: BTreeMap<u64, Live>,
    keys: HashMap<String, (u64, u64)>,
    key_order: VecDeque<(u64, String)>,
    next_id: u64,
    pub counters: Counters,
    bytes: u64,
    relocating: bool,
}

impl Store {
    /// Opens the log and rebuilds the state from it.
    pub fn open(settings: &Settings) -> Result<Store, String> {
        let options = cumulo_wal::Options {
            dir: settings.dir.clone(),
            segment_bytes: settings.segment_bytes,
            max_bytes: settings.max_bytes,
            // A request is at most a frame of the core; a segment holds one.
            max_record: settings.segment_bytes,
            sync: match settings.sync {
                crate::settings::Sync::Always => cumulo_wal::SyncMode::Always,
                crate::settings::Sync::Interval(d) => cumulo_wal::SyncMode::Interval(d),
                crate::settings::Sync::Never => cumulo_wal::SyncMode::Never,
            },
        };
        let (log, recovery) = cumulo_wal::Log::open(options).map_err(|e| e.to_string())?;
        let mut store = Store {
            log,
            entries: BTreeMap::new(),
            ready: BTreeSet::new(),
            delayed: BTreeSet::new(),
            dead: BTreeSet::new(),
            in_flight: 0,
            live: BTreeMap::new(),
            keys: HashMap::new(),
            key_order: VecDeque::new(),
            next_id: 1,
            counters: Counters::default(),
            bytes: 0,
            relocating: false,
        };
        for d in recovery.dropped() {
            store.counters.dropped_on_recovery_bytes += d.bytes();
            tracing::warn!(
                "queue {}: recovery dropped {} bytes of {} at offset {}: {}",
                settings.dir.display(),
                d.bytes(),
                d.path().display(),
                d.offset(),
                d.reason()
            );
        }
        let now = now_ms();
        let window = settings.dedup_window.as_millis() as u64;
        let mut unknown = 0u64;
        for (pos, bytes) in recovery.records() {
            match Record::decode(bytes) {
                Some(r) => store.apply(*pos, r, now, window),
                None => unknown += 1,
            }
        }
        if unknown > 0 {
            tracing::warn!("queue {}: skipped {unknown} records of an unknown kind", settings.dir.display());
        }
        // Whatever was in flight when the core stopped is tried again now.
        let ids: Vec<u64> = store.entries.keys().copied().collect();
        for id in ids {
            let e = &store.entries[&id];
            if e.state != State::Dead {
                let p = e.stored.priority;
                store.entries.get_mut(&id).expect("listed").state = State::Ready;
                store.ready.insert((p, id));
            }
        }
        store.counters.recovered = store.entries.len() as u64;
        // Ids go on from the clock (µs since the epoch) when that is ahead
        // of the log: a request whose record was dropped, or whose segment
        // was deleted once drained, never has its id given out again.
        store.next_id = store.next_id.max(now_ms().saturating_mul(1000));
        store.trim_keys(now, settings);
        Ok(store)
    }

    /// Applies one recovered record.
    fn apply(&mut self, pos: Position, r: Record, now: u64, window: u64) {
        match r {
            Record::Put(s) => {
                self.next_id = self.next_id.max(s.id + 1);
                if !s.idempotency_key.is_empty() && s.arrived_ms + window > now {
                    self.keys.insert(s.idempotency_key.clone(), (s.id, s.arrived_ms));
                    self.key_order.push_back((s.arrived_ms, s.idempotency_key.clone()));
                }
                let id = s.id;
                let dead = s.dead;
                if let Some(old) = self.entries.remove(&id) {
                    self.unpin(old.segment, id, old.stored.size());
                    self.bytes -= old.stored.size() as u64;
                    self.dead.remove(&id);
                }
                self.pin(pos.segment(), s.id, s.size());
                self.bytes += s.size() as u64;
                if dead {
                    self.dead.insert(id);
                }
                let state = if dead { State::Dead } else { State::Ready };
                self.entries.insert(id, Entry { stored: s, state, segment: pos.segment() });
            }
            Record::Started { id, attempt } => {
                if let Some(e) = self.entries.get_mut(&id) {
                    e.stored.attempts = e.stored.attempts.max(attempt);
                }
            }
            Record::Failed { id, failure } => {
                if let Some(e) = self.entries.get_mut(&id) {
                    e.stored.history.push(failure);
                }
            }
            Record::Dead { id } => {
                if let Some(e) = self.entries.get_mut(&id) {
                    e.stored.dead = true;
                    e.state = State::Dead;
                    self.dead.insert(id);
                }
            }
            Record::Revive { id } => {
                if let Some(e) = self.entries.get_mut(&id) {
                    e.stored.dead = false;
                    e.stored.attempts = 0;
                    e.state = State::Ready;
                    self.dead.remove(&id);
                }
            }
            Record::Done { id } => {
                if let Some(e) = self.entries.remove(&id) {
                    self.unpin(e.segment, id, e.stored.size());
                    self.bytes -= e.stored.size() as u64;
                    self.dead.remove(&id);
                }
            }
        }
    }

    fn pin(&mut self, segment: u64, id: u64, size: usize) {
        let l = self.live.entry(segment).or_default();
        l.ids.insert(id);
        l.bytes += size as u64;
    }

    fn unpin(&mut self, segment: u64, id: u64, size: usize) {
        if let Some(l) = self.live.get_mut(&segment) {
            l.ids.remove(&id);
            l.bytes = l.bytes.saturating_sub(size as u64);
            if l.ids.is_empty() {
                self.live.remove(&segment);
            }
        }
    }

    // ---- intake ----

    /// The id of an earlier request with this idempotency key, if it came
    /// within the window.
    pub fn duplicate_of(&mut self, key: &str, settings: &Settings) -> Option<u64> {
        self.trim_keys(now_ms(), settings);
        self.keys.get(key).map(|(id, _)| *id)
    }

    fn trim_keys(&mut self, now: u64, settings: &Settings) {
        let window = settings.dedup_window.as_millis() as u64;
        while let Some((at, key)) = self.key_order.front() {
            let expired = at + window <= now;
            let over = self.key_order.len() > settings.max_dedup_keys as usize;
            if !expired && !over {
                break;
            }
            if self.keys.get(key).is_some_and(|(_, a)| a == at) {
                self.keys.remove(key);
            }
            self.key_order.pop_front();
        }
    }

    /// Requests held: waiting, in flight and dead.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The next id, taken.
    pub fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Appends a request's `Put`; its future resolves once it is durable.
    pub fn append_put(&self, s: &Stored) -> impl Future<Output = Result<Position, WalError>> + 'static {
        self.log.append(crate::record::encode_put(s))
    }

    /// Takes a request whose `Put` is durable at `pos`.
    pub fn insert(&mut self, s: Stored, pos: Position, settings: &Settings) {
        let id = s.id;
        if !s.idempotency_key.is_empty() && !settings.dedup_window.is_zero() {
            self.keys.insert(s.idempotency_key.clone(), (id, s.arrived_ms));
            self.key_order.push_back((s.arrived_ms, s.idempotency_key.clone()));
        }
        self.pin(pos.segment(), s.id, s.size());
        self.bytes += s.size() as u64;
        self.ready.insert((s.priority, id));
        self.entries.insert(id, Entry { stored: s, state: State::Ready, segment: pos.segment() });
        self.counters.enqueued += 1;
    }

    // ---- delivery ----

    /// Moves requests whose delay is over to the ready set; returns when the
    /// next one is due (Unix ms), if any.
    pub fn promote_due(&mut self, now: u64) -> Option<u64> {
        while let Some(&(due, id)) = self.delayed.first() {
            if due > now {
                return Some(due);
            }
            self.delayed.pop_first();
            if let Some(e) = self.entries.get_mut(&id) {
                if e.state == State::Delayed(due) {
                    e.state = State::Ready;
                    self.ready.insert((e.stored.priority, id));
                }
            }
        }
        None
    }

    /// Takes the next request to deliver, if fewer than `max` are in flight:
    /// its attempt number is counted and logged first.
    pub fn start_next(&mut self, max: u32) -> Option<Stored> {
        if self.in_flight >= max {
            return None;
        }
        let (_, id) = self.ready.pop_first()?;
        let e = self.entries.get_mut(&id)?;
        e.state = State::InFlight;
        e.stored.attempts += 1;
        self.in_flight += 1;
        // Not awaited: losing it in a crash only under-counts one attempt.
        drop(self.log.append(Record::Started { id, attempt: e.stored.attempts }.encode()));
        Some(e.stored.clone())
    }

    /// The attempt ended and the request is finished (answered, or dropped).
    pub fn finish(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id) {
            if e.state == State::InFlight {
                self.in_flight -= 1;
            }
            self.dead.remove(&id);
            self.unpin(e.segment, id, e.stored.size());
            self.bytes -= e.stored.size() as u64;
            drop(self.log.append(Record::Done { id }.encode()));
        }
    }

    /// The attempt failed; try again at `due` (Unix ms).
    pub fn retry_at(&mut self, id: u64, failure: Failure, due: u64) {
        if let Some(e) = self.entries.get_mut(&id) {
            self.in_flight -= 1;
            e.stored.history.push(failure);
            e.state = State::Delayed(due);
            self.delayed.insert((due, id));
            self.counters.retried += 1;
            drop(self.log.append(Record::Failed { id, failure }.encode()));
        }
    }

    /// Out of attempts or time: kept as a dead letter (the oldest dropped
    /// past `max_dead_letters`). Returns the ids dropped to make room.
    pub fn make_dead(&mut self, id: u64, failure: Option<Failure>, max_dead: u32) -> Vec<u64> {
        let Some(e) = self.entries.get_mut(&id) else { return vec![] };
        if e.state == State::InFlight {
            self.in_flight -= 1;
        }
        if let Some(f) = failure {
            e.stored.history.push(f);
            drop(self.log.append(Record::Failed { id, failure: f }.encode()));
        }
        e.state = State::Dead;
        e.stored.dead = true;
        self.dead.insert(id);
        self.counters.dead_lettered += 1;
        drop(self.log.append(Record::Dead { id }.encode()));
        let mut dropped = Vec::new();
        while self.dead.len() > max_dead as usize {
            let Some(oldest) = self.dead.first().copied() else { break };
            self.finish(oldest);
            self.counters.dropped += 1;
            dropped.push(oldest);
        }
        dropped
    }

    pub fn get(&self, id: u64) -> Option<&Entry> {
        self.entries.get(&id)
    }

    // ---- operations ----

    /// Dead letters, oldest first, at most `limit`.
    pub fn dead_letters(&self, limit: usize) -> Vec<&Stored> {
        self.dead.iter().take(limit).filter_map(|id| self.entries.get(id)).map(|e| &e.stored).collect()
    }

    /// Forgets every dead letter; returns how many.
    pub fn purge(&mut self) -> u64 {
        let ids: Vec<u64> = self.dead.iter().copied().collect();
        for &id in &ids {
            self.finish(id);
        }
        self.counters.purged += ids.len() as u64;
        ids.len() as u64
    }

    /// Makes every dead letter pending again, attempts from 0; returns how many.
    pub fn replay(&mut self) -> u64 {
        let ids: Vec<u64> = std::mem::take(&mut self.dead).into_iter().collect();
        for &id in &ids {
            if let Some(e) = self.entries.get_mut(&id) {
                e.state = State::Ready;
                e.stored.dead = false;
                e.stored.attempts = 0;
                self.ready.insert((e.stored.priority, id));
                drop(self.log.append(Record::Revive { id }.encode()));
            }
        }
        self.counters.replayed += ids.len() as u64;
        ids.len() as u64
    }

    // ---- compaction ----

    /// The segments before the oldest one that still holds a kept request
    /// (and before the one being written): safe to delete.
    pub fn removable_through(&self) -> Option<u64> {
        let active = self.log.active_segment();
        let oldest_live = self.live.keys().next().copied().unwrap_or(active).min(active);
        oldest_live.checked_sub(1)
    }

    /// Requests to write again so that the oldest segment can go: those of
    /// the oldest live segment, when it is older than the one before the
    /// active one and holds less than a quarter of a segment.
    pub fn take_relocation(&mut self, segment_bytes: u64) -> Option<(u64, Vec<Stored>)> {
        if self.relocating {
            return None;
        }
        let active = self.log.active_segment();
        let (&seg, live) = self.live.iter().next()?;
        if seg + 1 >= active || live.bytes > segment_bytes / 4 {
            return None;
        }
        // Only that segment's requests: no scan of everything held.
        let moved: Vec<Stored> =
            live.ids.iter().filter_map(|id| self.entries.get(id)).map(|e| e.stored.clone()).collect();
        self.relocating = true;
        Some((seg, moved))
    }

    /// The relocated requests are durable at `positions`.
    pub fn relocated(&mut self, from: u64, moved: &[Stored], positions: &[Position]) {
        self.relocating = false;
        for (s, pos) in moved.iter().zip(positions) {
            if let Some(e) = self.entries.get_mut(&s.id) {
                if e.segment == from {
                    let size = e.stored.size();
                    e.segment = pos.segment();
                    self.unpin(from, s.id, size);
                    self.pin(pos.segment(), s.id, size);
                }
            }
        }
    }

    pub fn relocation_failed(&mut self) {
        self.relocating = false;
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    // ---- views ----

    pub fn depth(&self) -> usize {
        self.ready.len() + self.delayed.len()
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    pub fn dead_count(&self) -> usize {
        self.dead.len()
    }

    pub fn bytes_held(&self) -> u64 {
        self.bytes
    }

    /// When the oldest request not dead arrived (Unix ms).
    pub fn oldest_arrival(&self) -> Option<u64> {
        self.entries.values().find(|e| e.state != State::Dead).map(|e| e.stored.arrived_ms)
    }
}
