//! The writer thread: group commit, rotation, and the state it shares with
//! the `Log` handles.
//!
//! One thread owns the active segment. It takes every append queued since
//! its last write (bounded by [`MAX_BATCH_BYTES`] / [`MAX_BATCH_RECORDS`]),
//! writes them with one `pwrite` per segment they land in, makes them
//! durable with one `fdatasync` (`SyncMode::Always`), and only then
//! completes their futures. The callers' threads never touch the disk for
//! an append.

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::error::WalError;
use crate::record;
use crate::segment::{self, Active, HEADER_LEN};
use crate::{Position, SyncMode};

/// A write gathers appends until it holds this many bytes...
pub(crate) const MAX_BATCH_BYTES: u64 = 4 << 20;
/// ...or this many records (one `append_many` is never split, so one batch
/// can be larger).
pub(crate) const MAX_BATCH_RECORDS: usize = 4096;
/// A write buffer grown past this by a large batch is not kept.
const KEEP_BUFFER: usize = 8 << 20;

pub(crate) type Reply = oneshot::Sender<Result<Vec<Position>, WalError>>;

pub(crate) struct Append {
    pub(crate) records: Vec<Vec<u8>>,
    /// Encoded size, already counted in `Shared::committed`.
    pub(crate) bytes: u64,
    pub(crate) reply: Reply,
}

pub(crate) enum Command {
    Append(Append),
    Remove { through: u64, reply: oneshot::Sender<Result<u64, WalError>> },
}

/// State read by the handles and updated by the writer (and `remove_through`).
pub(crate) struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) max_bytes: u64,
    /// Bytes of segment files plus bytes queued but not yet written: what
    /// `max_bytes` is checked against, so that an append is refused at once.
    pub(crate) committed: AtomicU64,
    /// Bytes of segment files.
    pub(crate) on_disk: AtomicU64,
    pub(crate) active_segment: AtomicU64,
    /// Segments that are never written again, with their file sizes; the
    /// only ones `remove_through` may delete.
    pub(crate) closed: Mutex<BTreeMap<u64, u64>>,
    pub(crate) records: AtomicU64,
    pub(crate) bytes_appended: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) io_errors: AtomicU64,
    pub(crate) last_sync_ns: AtomicU64,
    pub(crate) max_sync_ns: AtomicU64,
}

impl Shared {
    /// `active_len`: the bytes of the active segment (its header, or all of
    /// a stand-in's).
    pub(crate) fn new(dir: PathBuf, max_bytes: u64, active: (u64, u64), closed: BTreeMap<u64, u64>) -> Shared {
        let (active, active_len) = active;
        let on_disk = closed.values().sum::<u64>() + active_len;
        Shared {
            dir,
            max_bytes,
            committed: AtomicU64::new(on_disk),
            on_disk: AtomicU64::new(on_disk),
            active_segment: AtomicU64::new(active),
            closed: Mutex::new(closed),
            records: AtomicU64::new(0),
            bytes_appended: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            io_errors: AtomicU64::new(0),
            last_sync_ns: AtomicU64::new(0),
            max_sync_ns: AtomicU64::new(0),
        }
    }

    pub(crate) fn closed(&self) -> MutexGuard<'_, BTreeMap<u64, u64>> {
        // The map is valid after any panic (single inserts and removes).
        self.closed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes that were counted (on disk or queued) and are gone.
    fn uncount(&self, bytes: u64, on_disk: bool) {
        self.committed.fetch_sub(bytes, Ordering::AcqRel);
        if on_disk {
            self.on_disk.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Bytes that appeared on disk without having been counted.
    fn count(&self, bytes: u64) {
        self.committed.fetch_add(bytes, Ordering::AcqRel);
        self.on_disk.fetch_add(bytes, Ordering::AcqRel);
    }
}

/// Deletes every closed segment numbered `through` or lower, then fsyncs
/// the directory. The active segment is never in `closed`, so it is never
/// deleted, whatever `through` says.
pub(crate) fn remove_through(shared: &Shared, through: u64) -> Result<u64, WalError> {
    // Taken out of the map first, so the unlinks run without the lock (the
    // writer takes it when it rotates) and a concurrent call cannot count
    // the same file twice.
    let victims: Vec<(u64, u64)> = {
        let mut closed = shared.closed();
        let keep = closed.split_off(&through.saturating_add(1));
        std::mem::replace(&mut *closed, keep).into_iter().collect()
    };
    if victims.is_empty() {
        return Ok(0);
    }
    let mut freed = 0;
    let mut failed = None;
    for (i, &(seg, bytes)) in victims.iter().enumerate() {
        if let Err(e) = segment::remove(&shared.dir, seg) {
            // Put back what is still there, to be tried again.
            shared.closed().extend(victims[i..].iter().copied());
            failed = Some(e);
            break;
        }
        freed += bytes;
    }
    shared.uncount(freed, true);
    if let Some(e) = failed {
        return Err(e);
    }
    segment::sync_dir(&shared.dir)?;
    Ok(freed)
}

/// Written to the active segment; waits for the fdatasync that completes it.
struct Done {
    reply: Reply,
    positions: Vec<Position>,
    bytes: u64,
}

pub(crate) struct Writer {
    shared: Arc<Shared>,
    sync: SyncMode,
    segment_bytes: u64,
    active: Active,
    next_segment: u64,
    buf: Vec<u8>,
    unsynced: Vec<Done>,
    last_sync: Instant,
}

impl Writer {
    pub(crate) fn new(shared: Arc<Shared>, sync: SyncMode, segment_bytes: u64, active: Active) -> Writer {
        let next_segment = active.segment + 1;
        Writer {
            shared,
            sync,
            segment_bytes,
            active,
            next_segment,
            buf: Vec::new(),
            unsynced: Vec::new(),
            last_sync: Instant::now(),
        }
    }

    /// Runs until every sender is gone and the queue is drained; returns
    /// the error of the final fdatasync, if it failed.
    pub(crate) fn run(mut self, rx: Receiver<Command>) -> Result<(), WalError> {
        let mut held = None;
        loop {
            let cmd = match held.take() {
                Some(cmd) => cmd,
                None => match self.next_command(&rx) {
                    Some(cmd) => cmd,
                    None => break,
                },
            };
            match cmd {
                Command::Remove { through, reply } => {
                    let removed = remove_through(&self.shared, through);
                    // A stand-in active segment (no room for a new one at
                    // open) gives way as soon as the removal made room, so
                    // that it too can be removed once drained.
                    if self.active.poisoned && removed.as_ref().is_ok_and(|n| *n > 0) {
                        let _ = self.rotate();
                    }
                    let _ = reply.send(removed);
                }
                Command::Append(first) => {
                    let mut bytes = first.bytes;
                    let mut records = first.records.len();
                    let mut batch = vec![first];
                    while bytes < MAX_BATCH_BYTES && records < MAX_BATCH_RECORDS {
                        match rx.try_recv() {
                            Ok(Command::Append(a)) => {
                                bytes += a.bytes;
                                records += a.records.len();
                                batch.push(a);
                            }
                            Ok(other) => {
                                held = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.write_batch(batch);
                }
            }
        }
        if self.active.dirty() || !self.unsynced.is_empty() {
            self.sync_now()?;
        }
        Ok(())
    }

    /// Blocks for the next command; with `SyncMode::Interval` it wakes up
    /// to sync written bytes that have waited for the interval.
    fn next_command(&mut self, rx: &Receiver<Command>) -> Option<Command> {
        loop {
            let SyncMode::Interval(every) = self.sync else {
                return rx.recv().ok();
            };
            if !self.active.dirty() {
                return rx.recv().ok();
            }
            match rx.recv_timeout(every.saturating_sub(self.last_sync.elapsed())) {
                Ok(cmd) => return Some(cmd),
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.sync_now();
                }
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn write_batch(&mut self, batch: Vec<Append>) {
        let mut queue = VecDeque::from(batch);
        while let Some(first) = queue.front() {
            let first_bytes = first.bytes;
            if self.active.poisoned || (self.active.has_records() && self.active.len + first_bytes > self.segment_bytes)
            {
                if let Err(e) = self.rotate() {
                    // No segment to write to: fail the rest of this batch.
                    for a in queue.drain(..) {
                        self.shared.uncount(a.bytes, false);
                        let _ = a.reply.send(Err(e.duplicate()));
                    }
                    break;
                }
            }
            // The appends that fit in this segment, at least one.
            let mut group = Vec::new();
            let mut len = 0;
            while let Some(a) = queue.front() {
                if !group.is_empty() && self.active.len + len + a.bytes > self.segment_bytes {
                    break;
                }
                len += a.bytes;
                group.extend(queue.pop_front());
            }
            self.write_group(group);
        }
        match self.sync {
            SyncMode::Always => {
                let _ = self.sync_now();
            }
            SyncMode::Interval(every) => {
                if self.active.dirty() && self.last_sync.elapsed() >= every {
                    let _ = self.sync_now();
                }
            }
            SyncMode::Never => {}
        }
    }

    /// One write of `group` at the end of the active segment.
    fn write_group(&mut self, group: Vec<Append>) {
        let start = self.active.len;
        self.buf.clear();
        let mut done = Vec::with_capacity(group.len());
        let mut records = 0;
        for a in group {
            let mut positions = Vec::with_capacity(a.records.len());
            for r in &a.records {
                positions.push(Position::new(self.active.segment, start + self.buf.len() as u64));
                record::encode(&mut self.buf, r);
            }
            records += a.records.len() as u64;
            done.push(Done { reply: a.reply, positions, bytes: a.bytes });
        }
        let n = self.buf.len() as u64;
        let written = self.active.file.write_all_at(&self.buf, start);
        if self.buf.capacity() > KEEP_BUFFER {
            self.buf = Vec::new();
        }
        match written {
            Ok(()) => {
                self.active.len = start + n;
                let s = &self.shared;
                s.on_disk.fetch_add(n, Ordering::AcqRel);
                s.records.fetch_add(records, Ordering::Relaxed);
                s.bytes_appended.fetch_add(n, Ordering::Relaxed);
                s.batches.fetch_add(1, Ordering::Relaxed);
                if matches!(self.sync, SyncMode::Always) {
                    self.unsynced.extend(done);
                } else {
                    for d in done {
                        let _ = d.reply.send(Ok(d.positions));
                    }
                }
            }
            Err(e) => {
                self.shared.io_errors.fetch_add(1, Ordering::Relaxed);
                let err = WalError::io(&self.active.path, "write", e);
                tracing::warn!(error = %err, records, "write-ahead log write failed; the appends fail");
                // Cut off whatever part of the group reached the file, so a
                // later recovery does not return records whose appends failed
                // and the next group starts at a record boundary.
                if self.active.file.set_len(start).is_err() {
                    self.active.poisoned = true;
                }
                for d in done {
                    self.shared.uncount(d.bytes, false);
                    let _ = d.reply.send(Err(err.duplicate()));
                }
            }
        }
    }

    /// fdatasync of the active segment, then completes what waited for it.
    fn sync_now(&mut self) -> Result<(), WalError> {
        if !self.active.dirty() {
            for d in self.unsynced.drain(..) {
                let _ = d.reply.send(Ok(d.positions));
            }
            return Ok(());
        }
        let t = Instant::now();
        let synced = self.active.file.sync_data();
        let took = duration_ns(t.elapsed());
        self.last_sync = Instant::now();
        let s = &self.shared;
        s.syncs.fetch_add(1, Ordering::Relaxed);
        s.last_sync_ns.store(took, Ordering::Relaxed);
        s.max_sync_ns.fetch_max(took, Ordering::Relaxed);
        match synced {
            Ok(()) => {
                self.active.synced_len = self.active.len;
                for d in self.unsynced.drain(..) {
                    let _ = d.reply.send(Ok(d.positions));
                }
                Ok(())
            }
            Err(e) => {
                s.io_errors.fetch_add(1, Ordering::Relaxed);
                let err = WalError::io(&self.active.path, "fdatasync", e);
                self.active.poisoned = true;
                if self.unsynced.is_empty() {
                    // Interval / Never: these records were acknowledged after
                    // their write; they may be lost now, and nothing can be
                    // taken back.
                    tracing::error!(error = %err, "write-ahead log fdatasync failed; acknowledged records may be lost");
                } else {
                    // Always: nothing written since the last good sync was
                    // acknowledged; cut it off and fail those appends.
                    tracing::warn!(error = %err, "write-ahead log fdatasync failed; the batch fails");
                    let back = self.active.synced_len;
                    let truncated = self.active.file.set_len(back).is_ok();
                    if truncated {
                        s.on_disk.fetch_sub(self.active.len - back, Ordering::AcqRel);
                        self.active.len = back;
                    }
                    for d in self.unsynced.drain(..) {
                        if truncated {
                            s.committed.fetch_sub(d.bytes, Ordering::AcqRel);
                        }
                        let _ = d.reply.send(Err(err.duplicate()));
                    }
                }
                Err(err)
            }
        }
    }

    /// Closes the active segment (synced first, so a segment is durable
    /// before a later one holds records) and starts the next one.
    fn rotate(&mut self) -> Result<(), WalError> {
        if self.active.dirty() || !self.unsynced.is_empty() {
            // A failure has completed what waited and poisoned the segment;
            // it is closed all the same.
            let _ = self.sync_now();
        }
        // A number is used once even when creating it fails, so a file left
        // behind by a failed attempt is never reused.
        let number = self.next_segment;
        self.next_segment += 1;
        let new = segment::create(&self.shared.dir, number).inspect_err(|_| {
            self.shared.io_errors.fetch_add(1, Ordering::Relaxed);
        })?;
        let old = std::mem::replace(&mut self.active, new);
        // After a failed truncation the file may hold more than `len`.
        let size = old.file.metadata().map_or(old.len, |m| m.len());
        if size > old.len {
            self.shared.count(size - old.len);
        }
        self.shared.closed().insert(old.segment, size.max(old.len));
        self.shared.count(HEADER_LEN);
        self.shared.active_segment.store(number, Ordering::Release);
        Ok(())
    }
}

pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
