//! A segmented, append-only write-ahead log of opaque byte records.
//!
//! The durable queue stores each accepted request here before acknowledging
//! it. This crate knows nothing about queues: it appends records, makes them
//! durable, reads them back at open, and deletes whole old segments when told.
//!
//! # Layout
//!
//! A directory of segment files `{segment:020}.wal`, plus a `LOCK` file held
//! (`flock`) while a [`Log`] is open, so two processes never write one log.
//! A segment is a 24-byte header (magic, version, segment number, checksum)
//! followed by records `[len: u32 LE][crc32: u32 LE][payload]`; the checksum
//! covers the length bytes and the payload. Files with other names are left
//! alone.
//!
//! # Writing
//!
//! [`Log::append`] and [`Log::append_many`] queue the records and return a
//! future; the record is queued when the method is called, not when the
//! future is first polled, and dropping the future does not take it back.
//! One writer thread takes everything queued since its last write and
//! writes it with one `pwrite` (a batch is bounded at about 4 MiB or 4096
//! records); with [`SyncMode::Always`] it then calls `fdatasync` once for the
//! whole batch and only then completes the futures (group commit: 200
//! concurrent appends cost a handful of syncs, not 200). With
//! [`SyncMode::Interval`] the futures complete after the write and the
//! writer syncs at most once per interval (also when idle); with
//! [`SyncMode::Never`] they complete after the write. A future never
//! completes before its bytes are written. The records of one
//! `append_many` go into one segment in one write.
//!
//! At open a new active segment is always started; older segments are
//! read-only. When a write would take the active segment past
//! `segment_bytes` (and it holds records), it is synced, closed, and the
//! next segment is created (header synced, directory fsynced).
//!
//! # Limits and errors
//!
//! - An append that would take the segment files (plus what is queued) past
//!   `max_bytes` fails at once with [`WalError::Full`]; nothing is written.
//!   The new segment's 24-byte header at a rotation is not checked against
//!   the limit, so the files may exceed it by that much.
//! - A record longer than `max_record` fails at once with [`WalError::TooLarge`].
//! - An I/O error (ENOSPC, EIO) fails that write's futures with
//!   [`WalError::Io`] (the OS error kept). The active file is truncated back
//!   to the end of the last good write, so recovery does not return records
//!   whose appends failed. The log stays open: a later append is tried
//!   again, so appends work again once space is freed. After a failed
//!   `fdatasync` the active segment is abandoned (the kernel may have
//!   dropped the dirty pages, so a later sync of that file proves nothing)
//!   and the next write starts a new segment. If truncation itself fails,
//!   the failed records may still be read back at recovery; the queue must
//!   treat a failed append as "maybe stored" (at-least-once), as with any
//!   storage whose write may reach the disk before the error is seen.
//!
//! # Recovery
//!
//! [`Log::open`] reads every segment in order and returns the good records
//! with their positions in a [`Recovery`]. Within a segment reading stops at
//! the first torn record (the file ends inside it), bad checksum, or
//! impossible length; a bad header drops the whole file. What was not read
//! is reported in [`Recovery::dropped`] (file, offset, bytes, reason), and
//! reading goes on with the next segment, because segments are independent:
//! each is synced before the next one gets records. The damaged file is not
//! truncated or repaired: it is read-only now, the bytes stay for a
//! post-mortem, and [`Log::remove_through`] deletes it like any other
//! segment once the caller is done with it (until then, each open reports
//! it again). A torn tail in the segment that was active at a crash is the
//! normal trace of a write the crash cut short: with `SyncMode::Always`
//! none of those records was acknowledged.
//!
//! # Why hand-written
//!
//! The queue needs: one `fdatasync` per group of appends from many
//! concurrent async senders on a single-threaded event loop that must never
//! block on disk; deletion decided by the caller per segment (it knows
//! which segments still hold live requests); a byte limit answered at once;
//! and a report of what recovery dropped. `okaywal` 0.3.1 (checked with
//! `cargo info`; last released 2022) does group its commits, but it calls
//! itself early in development, not for production, with an unstable file
//! format; its `commit` blocks the calling thread; space is reclaimed
//! through its own checkpoint callback over whole files it recycles, not
//! by the caller; it has no byte limit; and recovery is an interactive
//! callback, not a report. A log this small (a few hundred lines) is
//! cheaper to own than to bend that one.

mod error;
mod record;
mod recovery;
mod segment;
mod writer;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::sync::oneshot;

pub use error::WalError;
pub use recovery::{DropReason, Dropped, Recovery};

use writer::{Append, Command, Shared, Writer};

/// How an append becomes durable before its future completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Written and `fdatasync`ed (once per batch).
    Always,
    /// Written; the writer syncs at most once per this interval, so a crash
    /// of the machine (not of the process) may lose that much.
    Interval(Duration),
    /// Written; synced only when a segment is closed and at close.
    Never,
}

/// How to open a [`Log`].
#[derive(Clone, Debug)]
pub struct Options {
    /// The log's directory; created if missing.
    pub dir: PathBuf,
    /// A segment is closed once the next write would take it past this
    /// (default 64 MiB). One `append_many` larger than this gets a segment
    /// of its own.
    pub segment_bytes: u64,
    /// The most bytes all segment files may take (default 1 GiB).
    pub max_bytes: u64,
    /// The longest record accepted (default 16 MiB; at most 1 GiB, which
    /// the format allows).
    pub max_record: u64,
    /// When an append's future completes (default `Always`).
    pub sync: SyncMode,
}

impl Options {
    /// The defaults for `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Options {
        Options {
            dir: dir.into(),
            segment_bytes: 64 << 20,
            max_bytes: 1 << 30,
            max_record: 16 << 20,
            sync: SyncMode::Always,
        }
    }
}

/// Where a record is: its segment and the byte offset of its frame there.
/// Ordered as the log is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    segment: u64,
    offset: u64,
}

impl Position {
    pub(crate) fn new(segment: u64, offset: u64) -> Position {
        Position { segment, offset }
    }

    /// The segment number (what [`Log::remove_through`] takes).
    pub fn segment(&self) -> u64 {
        self.segment
    }

    /// The byte offset of the record's frame in its segment file.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.segment, self.offset)
    }
}

/// A snapshot of the log's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    bytes_on_disk: u64,
    bytes_queued: u64,
    max_bytes: u64,
    segments: u64,
    active_segment: u64,
    records_appended: u64,
    bytes_appended: u64,
    batches: u64,
    syncs: u64,
    io_errors: u64,
    last_sync_latency: Duration,
    max_sync_latency: Duration,
}

impl Stats {
    /// Bytes of all segment files, the active one included.
    pub fn bytes_on_disk(&self) -> u64 {
        self.bytes_on_disk
    }
    /// Bytes accepted but not yet written.
    pub fn bytes_queued(&self) -> u64 {
        self.bytes_queued
    }
    /// `Options::max_bytes`.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }
    /// Segment files, the active one included.
    pub fn segments(&self) -> u64 {
        self.segments
    }
    /// The segment being written.
    pub fn active_segment(&self) -> u64 {
        self.active_segment
    }
    /// Records written since open.
    pub fn records_appended(&self) -> u64 {
        self.records_appended
    }
    /// Bytes written since open (payloads and frames).
    pub fn bytes_appended(&self) -> u64 {
        self.bytes_appended
    }
    /// Writes (`pwrite` calls) since open.
    pub fn batches(&self) -> u64 {
        self.batches
    }
    /// `fdatasync` calls on segments since open (not those made when a segment is created).
    pub fn syncs(&self) -> u64 {
        self.syncs
    }
    /// Failed writes, syncs and segment creations since open.
    pub fn io_errors(&self) -> u64 {
        self.io_errors
    }
    /// How long the latest `fdatasync` took.
    pub fn last_sync_latency(&self) -> Duration {
        self.last_sync_latency
    }
    /// The longest `fdatasync` since open.
    pub fn max_sync_latency(&self) -> Duration {
        self.max_sync_latency
    }
}

/// An open write-ahead log: a cheap, clonable handle (`Send + Sync`).
///
/// The writer thread stops when [`Log::close`] is called on any handle, or
/// when the last handle is dropped; both wait until what was queued is
/// written and synced.
#[derive(Clone)]
pub struct Log {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    max_record: u64,
    tx: Mutex<Option<mpsc::Sender<Command>>>,
    thread: Mutex<Option<JoinHandle<Result<(), WalError>>>>,
    lock: Mutex<Option<File>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each of these mutexes guards an Option that is only ever taken or
    // read, so it is valid after a panic elsewhere.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

type Queued = Result<oneshot::Receiver<Result<Vec<Position>, WalError>>, WalError>;

impl Log {
    /// Opens (creating if missing) the log in `options.dir`, reads back its
    /// segments, and starts a new active segment and the writer thread.
    pub fn open(options: Options) -> Result<(Log, Recovery), WalError> {
        let Options { dir, segment_bytes, max_bytes, max_record, sync } = options;
        std::fs::create_dir_all(&dir).map_err(|e| WalError::io(&dir, "create directory", e))?;
        let lock_file = lock_dir(&dir)?;

        let existing = segment::list(&dir)?;
        let recovery = recovery::recover(&dir, &existing)?;
        let mut closed: BTreeMap<u64, u64> = existing.iter().copied().collect();
        let active = match (segment::create(&dir, existing.last().map_or(1, |&(s, _)| s + 1)), existing.last()) {
            (Ok(a), _) => a,
            // No room for a new segment (a full disk): the log still opens,
            // so that what it holds can be read, delivered and deleted. The
            // last segment stands in as a poisoned active one: nothing is
            // written to it, and the first append tries a new segment again.
            (Err(e @ WalError::Io { .. }), Some(&(last, _))) => {
                tracing::warn!("{e}; the log opens without a new segment until one can be created");
                closed.remove(&last);
                segment::stand_in(&dir, last)?
            }
            (Err(e), _) => return Err(e),
        };
        let active_number = active.segment;

        let shared = Arc::new(Shared::new(dir.clone(), max_bytes, (active_number, active.len), closed));
        let writer = Writer::new(shared.clone(), sync, segment_bytes, active);
        let (tx, rx) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("cumulo-wal".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| WalError::io(&dir, "start writer thread", e))?;
        let inner = Inner {
            shared,
            max_record: max_record.min(record::MAX_PAYLOAD),
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
            lock: Mutex::new(Some(lock_file)),
        };
        Ok((Log { inner: Arc::new(inner) }, recovery))
    }

    /// Appends one record; resolves to its position once it is durable as
    /// the [`SyncMode`] says. `Full` and `TooLarge` are answered at once.
    pub fn append(&self, record: Vec<u8>) -> impl Future<Output = Result<Position, WalError>> + Send + 'static {
        let queued = self.submit(vec![record]);
        async move { wait(queued).await?.pop().ok_or(WalError::Closed) }
    }

    /// Appends the records in one write to one segment; they are all
    /// written, or (on an error) none is acknowledged.
    pub fn append_many(
        &self,
        records: Vec<Vec<u8>>,
    ) -> impl Future<Output = Result<Vec<Position>, WalError>> + Send + 'static {
        let queued = self.submit(records);
        wait(queued)
    }

    fn submit(&self, records: Vec<Vec<u8>>) -> Queued {
        let (reply, rx) = oneshot::channel();
        let inner = &self.inner;
        let mut bytes = 0;
        for r in &records {
            let len = r.len() as u64;
            if len > inner.max_record {
                return Err(WalError::TooLarge { len, max: inner.max_record });
            }
            bytes += record::encoded_len(r.len());
        }
        // Under the lock, so the queue order is the order of the checks.
        let tx = lock(&inner.tx);
        let Some(tx) = tx.as_ref() else {
            return Err(WalError::Closed);
        };
        if records.is_empty() {
            let _ = reply.send(Ok(Vec::new()));
            return Ok(rx);
        }
        let shared = &inner.shared;
        shared
            .committed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= shared.max_bytes)
            })
            .map_err(|used| WalError::Full { used, limit: shared.max_bytes, needed: bytes })?;
        if tx.send(Command::Append(Append { records, bytes, reply })).is_err() {
            // The writer thread is gone (it panicked).
            shared.committed.fetch_sub(bytes, Ordering::AcqRel);
            return Err(WalError::Closed);
        }
        Ok(rx)
    }

    /// The segment being written; every lower-numbered segment is closed.
    pub fn active_segment(&self) -> u64 {
        self.inner.shared.active_segment.load(Ordering::Acquire)
    }

    /// Deletes every closed segment numbered `segment` or lower (never the
    /// active one, whatever `segment` says), fsyncs the directory, and
    /// returns the bytes freed. Runs on the calling thread: an unlink and a
    /// directory fsync; see [`Log::remove_through_async`] for an event loop.
    pub fn remove_through(&self, segment: u64) -> Result<u64, WalError> {
        writer::remove_through(&self.inner.shared, segment)
    }

    /// [`Log::remove_through`] done by the writer thread, between writes,
    /// so the caller's thread does no disk I/O.
    pub fn remove_through_async(&self, segment: u64) -> impl Future<Output = Result<u64, WalError>> + Send + 'static {
        let (reply, rx) = oneshot::channel();
        let sent = match lock(&self.inner.tx).as_ref() {
            Some(tx) => tx.send(Command::Remove { through: segment, reply }).is_ok(),
            None => false,
        };
        async move {
            if !sent {
                return Err(WalError::Closed);
            }
            rx.await.unwrap_or(Err(WalError::Closed))
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let s = &self.inner.shared;
        let on_disk = s.on_disk.load(Ordering::Acquire);
        let segments = lock(&s.closed).len() as u64 + 1;
        Stats {
            bytes_on_disk: on_disk,
            bytes_queued: s.committed.load(Ordering::Acquire).saturating_sub(on_disk),
            max_bytes: s.max_bytes,
            segments,
            active_segment: s.active_segment.load(Ordering::Acquire),
            records_appended: s.records.load(Ordering::Relaxed),
            bytes_appended: s.bytes_appended.load(Ordering::Relaxed),
            batches: s.batches.load(Ordering::Relaxed),
            syncs: s.syncs.load(Ordering::Relaxed),
            io_errors: s.io_errors.load(Ordering::Relaxed),
            last_sync_latency: Duration::from_nanos(s.last_sync_ns.load(Ordering::Relaxed)),
            max_sync_latency: Duration::from_nanos(s.max_sync_ns.load(Ordering::Relaxed)),
        }
    }

    /// Stops the writer once everything queued is written and synced, and
    /// releases the directory. Appends through other handles then fail with
    /// `Closed`. Returns the error of the final sync, if it failed.
    pub fn close(self) -> Result<(), WalError> {
        self.inner.shutdown()
    }
}

async fn wait(queued: Queued) -> Result<Vec<Position>, WalError> {
    queued?.await.unwrap_or(Err(WalError::Closed))
}

impl Inner {
    fn shutdown(&self) -> Result<(), WalError> {
        // Dropping the only sender lets the writer drain the queue and stop.
        drop(lock(&self.tx).take());
        let handle = lock(&self.thread).take();
        let result = match handle {
            Some(h) => h.join().unwrap_or(Err(WalError::Closed)),
            None => Ok(()),
        };
        drop(lock(&self.lock).take());
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, "write-ahead log: closing failed");
        }
    }
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.inner.shared.dir)
            .field("active_segment", &self.active_segment())
            .finish()
    }
}

/// Holds `dir/LOCK` with `flock` for as long as the log is open.
fn lock_dir(dir: &std::path::Path) -> Result<File, WalError> {
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| WalError::io(&path, "create lock file", e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(WalError::InUse { path }),
        Err(TryLockError::Error(e)) => Err(WalError::io(&path, "lock", e)),
    }
}
