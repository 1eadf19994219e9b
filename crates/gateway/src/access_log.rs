//! The access log (`access_log = true` or a file path): one line per request,
//! kept off the hot path. A request only appends to an in-memory buffer; once
//! a second (or when the buffer grows large) the buffer is handed to a writer
//! thread, so a slow disk or a full stderr pipe never stalls the event loop.
//! If the writer falls behind, lines are dropped and counted, never queued
//! without bound.
//!
//! One log per target, shared by every shard (`core.threads` > 1 runs the
//! gateway on each) and every gateway that names it: a line's time is read
//! under the buffer's lock, so the file is in time order, not in batches of
//! one shard then another's.

use super::settings::AccessLogTarget;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// Buffered bytes that trigger a hand-off before the next tick.
const EARLY_FLUSH_BYTES: usize = 256 * 1024;
/// Batches the writer thread may be behind before lines are dropped.
const WRITER_BACKLOG: usize = 8;

pub struct AccessLog {
    buf: Mutex<Vec<u8>>,
    writer: SyncSender<Vec<u8>>,
    dropped: AtomicU64,
}

/// What one line records.
pub struct Entry<'a> {
    /// The client's `ip:port`.
    pub remote: &'a str,
    pub method: &'a str,
    pub target: &'a str,
    pub version: &'a str,
    pub status: u16,
    pub body_bytes: u64,
    pub started: Instant,
}

/// Where the lines go, opened when the service is created so that a bad
/// path stops the core at start.
pub type Sink = Box<dyn Write + std::marker::Send>;

pub fn open_sink(target: &AccessLogTarget) -> Result<Option<Sink>, String> {
    Ok(Some(match target {
        AccessLogTarget::Off => return Ok(None),
        AccessLogTarget::Stderr => Box::new(std::io::stderr()),
        AccessLogTarget::File(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("http: cannot open access_log {}: {e}", path.display()))?,
        ),
    }))
}

thread_local! {
    /// A line but its time, written before the lock is taken.
    static LINE: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(256));
}

impl AccessLog {
    /// The log of `target`: the one another shard or gateway already
    /// writes (`sink` then unused), else a new one with its writer thread.
    /// Either way this shard runs a flush task for it.
    pub fn start(target: &AccessLogTarget, sink: Sink) -> std::io::Result<Arc<AccessLog>> {
        static ALL: OnceLock<Mutex<HashMap<AccessLogTarget, Weak<AccessLog>>>> = OnceLock::new();
        let mut all = ALL.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|_, l| l.strong_count() > 0);
        let log = match all.get(target).and_then(Weak::upgrade) {
            Some(log) => log,
            None => {
                let log = Arc::new(AccessLog::new(sink)?);
                all.insert(target.clone(), Arc::downgrade(&log));
                log
            }
        };
        tokio::task::spawn_local(flush_every_second(Arc::downgrade(&log)));
        Ok(log)
    }

    fn new(mut sink: Sink) -> std::io::Result<AccessLog> {
        let (tx, rx) = sync_channel::<Vec<u8>>(WRITER_BACKLOG);
        std::thread::Builder::new().name("http-access-log".into()).spawn(move || {
            // Ends when the log is dropped (the channel closes).
            while let Ok(batch) = rx.recv() {
                let _ = sink.write_all(&batch);
                let _ = sink.flush();
            }
        })?;
        Ok(AccessLog { buf: Mutex::new(Vec::with_capacity(64 * 1024)), writer: tx, dropped: AtomicU64::new(0) })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record(&self, e: &Entry<'_>) {
        LINE.with_borrow_mut(|line| {
            line.clear();
            let _ = writeln!(
                line,
                " {} \"{} {} {}\" {} {} {}us",
                e.remote,
                e.method,
                e.target,
                e.version,
                e.status,
                e.body_bytes,
                e.started.elapsed().as_micros()
            );
            let mut buf = self.lock();
            let _ = write!(buf, "{}", Utc(SystemTime::now()));
            buf.extend_from_slice(line);
            if buf.len() >= EARLY_FLUSH_BYTES {
                self.flush_locked(&mut buf);
            }
        });
    }

    fn flush(&self) {
        self.flush_locked(&mut self.lock());
    }

    /// Hands the buffer to the writer with the lock held, so that batches
    /// reach it in the order their lines were written.
    fn flush_locked(&self, buf: &mut Vec<u8>) {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            let _ = writeln!(
                buf,
                "{} access log: {dropped} lines dropped (the writer fell behind)",
                Utc(SystemTime::now())
            );
        }
        if buf.is_empty() {
            return;
        }
        let batch = std::mem::replace(buf, Vec::with_capacity(64 * 1024));
        match self.writer.try_send(batch) {
            Ok(()) => self.dropped.store(0, Ordering::Relaxed),
            Err(TrySendError::Full(batch)) | Err(TrySendError::Disconnected(batch)) => {
                let lines = batch.iter().filter(|&&b| b == b'\n').count() as u64;
                self.dropped.store(dropped + lines, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.flush();
    }
}

/// One per shard that writes the log: a shard that stops leaves the others
/// flushing it.
async fn flush_every_second(log: Weak<AccessLog>) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(log) = log.upgrade() else { return };
        log.flush();
    }
}

/// A time as `2025-01-31T23:59:59.123Z`, without a date library.
struct Utc(SystemTime);

impl std::fmt::Display for Utc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since = self.0.duration_since(UNIX_EPOCH).unwrap_or_default();
        let secs = since.as_secs();
        let (y, m, d) = civil_from_days((secs / 86_400) as i64);
        let s = secs % 86_400;
        write!(f, "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", s / 3600, s / 60 % 60, s % 60, since.subsec_millis())
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        let t = UNIX_EPOCH + Duration::from_millis(951_782_400_123);
        assert_eq!(Utc(t).to_string(), "2000-02-29T00:00:00.123Z");
    }
}
