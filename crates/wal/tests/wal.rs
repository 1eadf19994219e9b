//! The log on a real disk: the directory is under the build's target
//! directory (not a possibly-tmpfs /tmp), so fdatasync does real work.

use std::fs::{self, OpenOptions};
use std::future::Future;
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Command;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cumulo_wal::{DropReason, Dropped, Log, Options, Position, SyncMode, WalError};

const HEADER: u64 = 24;
const FRAME: u64 = 8;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("wal-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Small segments, so a few dozen records span several.
fn small(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.segment_bytes = 1024;
    o
}

/// Awaits the way the queue does: a current-thread runtime with a LocalSet.
fn run<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

/// Polls a future once: `Some` when it was ready without waiting.
fn now<F: Future>(f: F) -> Option<F::Output> {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn rec(i: usize, len: usize) -> Vec<u8> {
    let mut r = format!("record-{i:05}-").into_bytes();
    r.extend((0..len.saturating_sub(r.len())).map(|j| (i + j) as u8));
    r
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:020}.wal"))
}

type Records = Vec<(Position, Vec<u8>)>;

/// Opens the log again. A log just dropped has released its lock, but a
/// process another test spawns at that moment holds a copy of the lock's
/// descriptor from its fork until its exec closes it (close-on-exec), so
/// `InUse` is retried for up to a second; any other error fails at once.
fn reopen(o: &Options) -> (Log, Records, Vec<Dropped>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    let (log, rec) = loop {
        match Log::open(o.clone()) {
            Err(WalError::InUse { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            opened => break opened.unwrap(),
        }
    };
    let (records, dropped) = rec.into_parts();
    (log, records, dropped)
}

/// Appends `n` records of `len` bytes one after the other.
fn fill(log: &Log, from: usize, n: usize, len: usize) -> Records {
    run(async {
        let mut out = Vec::new();
        for i in from..from + n {
            let r = rec(i, len);
            let p = log.append(r.clone()).await.unwrap();
            out.push((p, r));
        }
        out
    })
}

#[test]
fn handles_and_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send_static<T: Send + 'static>(_: &T) {}
    send_sync::<Log>();
    let t = tmp();
    let (log, _) = Log::open(Options::new(t.path())).unwrap();
    let f = log.append(b"x".to_vec());
    send_static(&f);
    let g = log.append_many(vec![]);
    send_static(&g);
    assert_eq!(run(g).unwrap(), vec![]);
    run(f).unwrap();
}

#[test]
fn round_trip_in_order_across_segments() {
    let t = tmp();
    let o = small(t.path());
    let (log, recovery) = Log::open(o.clone()).unwrap();
    assert!(recovery.records().is_empty() && recovery.is_clean());
    assert_eq!(log.active_segment(), 1);

    let mut written = fill(&log, 0, 60, 50);
    let batch: Vec<Vec<u8>> = (60..70).map(|i| rec(i, 30)).collect();
    let positions = run(log.append_many(batch.clone())).unwrap();
    assert!(positions.iter().all(|p| p.segment() == positions[0].segment()), "one batch, one segment");
    written.extend(positions.into_iter().zip(batch));

    assert!(written.windows(2).all(|w| w[0].0 < w[1].0), "positions grow in log order");
    let last_segment = written.last().unwrap().0.segment();
    assert!(last_segment >= 4, "60 x 58 bytes in 1 KiB segments span several, got {last_segment}");
    assert_eq!(log.stats().segments(), last_segment);
    for f in segment_files(t.path()) {
        assert!(fs::metadata(&f).unwrap().len() <= 1024, "{} over segment_bytes", f.display());
    }
    log.close().unwrap();

    let (log, records, dropped) = reopen(&o);
    assert_eq!(records, written);
    assert!(dropped.is_empty(), "{dropped:?}");
    // A new segment is always started at open; the old ones are read-only.
    assert_eq!(log.active_segment(), last_segment + 1);
    let more = fill(&log, 100, 5, 20);
    assert!(more.iter().all(|(p, _)| p.segment() == last_segment + 1 && p.offset() >= HEADER));
    written.extend(more);
    drop(log);

    let (_log, records, dropped) = reopen(&o);
    assert_eq!(records, written);
    assert!(dropped.is_empty());
}

#[test]
fn group_commit_syncs_far_fewer_times_than_appends() {
    let t = tmp();
    let mut o = Options::new(t.path());
    o.sync = SyncMode::Always;
    let (log, _) = Log::open(o.clone()).unwrap();
    let positions = run(async {
        // !Send state on a LocalSet, as in the queue's event loop.
        let shared = Rc::new(log.clone());
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let log = Rc::clone(&shared);
                tokio::task::spawn_local(async move { log.append(rec(i, 100)).await })
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap().unwrap());
        }
        out
    });
    let stats = log.stats();
    assert_eq!(stats.records_appended(), 200);
    assert!(stats.syncs() >= 1);
    assert!(stats.syncs() <= 40, "200 concurrent appends took {} fdatasyncs", stats.syncs());
    assert!(stats.batches() <= stats.syncs(), "Always syncs every write");
    eprintln!(
        "200 appends: {} writes, {} syncs, last sync {:?}",
        stats.batches(),
        stats.syncs(),
        stats.last_sync_latency()
    );
    log.close().unwrap();

    let (_log, records, _) = reopen(&o);
    assert_eq!(records.len(), 200);
    let mut sorted = positions.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 200);
    for (i, p) in positions.iter().enumerate() {
        let (_, payload) = records.iter().find(|(q, _)| q == p).unwrap();
        assert_eq!(payload, &rec(i, 100));
    }
}

#[test]
fn torn_tail_keeps_the_records_before_it() {
    let t = tmp();
    let o = Options::new(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 10, 100);
    log.close().unwrap();

    // The process died in the middle of writing the last record.
    let file = segment_path(t.path(), 1);
    let len = fs::metadata(&file).unwrap().len();
    OpenOptions::new().write(true).open(&file).unwrap().set_len(len - 30).unwrap();

    let (_log, records, dropped) = reopen(&o);
    assert_eq!(records, written[..9]);
    assert_eq!(dropped.len(), 1);
    let d = &dropped[0];
    assert_eq!(d.path(), file);
    assert_eq!(d.segment(), 1);
    assert_eq!(d.offset(), written[9].0.offset());
    assert_eq!(d.bytes(), FRAME + 100 - 30);
    assert_eq!(d.reason(), &DropReason::TornTail);
    assert!(d.to_string().contains("torn tail"), "{d}");
}

#[test]
fn torn_frame_header_is_a_torn_tail() {
    let t = tmp();
    let o = Options::new(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 3, 10);
    log.close().unwrap();
    let file = segment_path(t.path(), 1);
    let cut = written[2].0.offset() + 5; // inside the third record's frame
    OpenOptions::new().write(true).open(&file).unwrap().set_len(cut).unwrap();

    let (_log, records, dropped) = reopen(&o);
    assert_eq!(records, written[..2]);
    assert_eq!(dropped[0].reason(), &DropReason::TornTail);
    assert_eq!((dropped[0].offset(), dropped[0].bytes()), (written[2].0.offset(), 5));
}

#[test]
fn corrupted_byte_drops_the_rest_of_its_segment_only() {
    let t = tmp();
    let o = small(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 40, 50);
    log.close().unwrap();
    let in_first: Vec<_> = written.iter().filter(|(p, _)| p.segment() == 1).collect();
    assert!(in_first.len() >= 5 && written.iter().any(|(p, _)| p.segment() == 3));

    // Flip one payload byte of the third record of segment 1.
    let bad = in_first[2].0;
    let file = segment_path(t.path(), 1);
    let mut f = OpenOptions::new().read(true).write(true).open(&file).unwrap();
    let at = bad.offset() + FRAME + 7;
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x40]).unwrap();
    drop(f);
    let file_len = fs::metadata(&file).unwrap().len();

    let (_log, records, dropped) = reopen(&o);
    let expected: Vec<_> =
        written.iter().filter(|(p, _)| p.segment() != 1 || p.offset() < bad.offset()).cloned().collect();
    assert_eq!(records, expected, "the records before it and every later segment are kept");
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].reason(), &DropReason::BadChecksum);
    assert_eq!(dropped[0].offset(), bad.offset());
    assert_eq!(dropped[0].bytes(), file_len - bad.offset());

    // The damaged file is left as it was and reported again on every open.
    assert_eq!(fs::metadata(&file).unwrap().len(), file_len);
}

#[test]
fn corrupted_length_is_caught() {
    let t = tmp();
    let o = Options::new(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 4, 20);
    log.close().unwrap();
    let file = segment_path(t.path(), 1);
    let mut f = OpenOptions::new().write(true).open(&file).unwrap();

    // A length one smaller still fits in the file: the checksum catches it.
    f.seek(SeekFrom::Start(written[1].0.offset())).unwrap();
    f.write_all(&19u32.to_le_bytes()).unwrap();
    let (log, records, dropped) = reopen(&o);
    assert_eq!(records, written[..1]);
    assert_eq!(dropped[0].reason(), &DropReason::BadChecksum);
    drop(log);

    // A length the format cannot hold.
    f.seek(SeekFrom::Start(written[1].0.offset())).unwrap();
    f.write_all(&u32::MAX.to_le_bytes()).unwrap();
    let (_log, records, dropped) = reopen(&o);
    assert_eq!(records, written[..1]);
    assert_eq!(dropped[0].reason(), &DropReason::BadLength(u64::from(u32::MAX)));
}

#[test]
fn bad_header_drops_that_file_and_keeps_the_others() {
    let t = tmp();
    let o = small(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 50, 50);
    log.close().unwrap();
    assert!(written.iter().any(|(p, _)| p.segment() >= 3));

    let file = segment_path(t.path(), 2);
    let mut f = OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all(b"NOTAWAL!").unwrap();
    drop(f);
    let file_len = fs::metadata(&file).unwrap().len();
    // Other names in the directory are ignored.
    fs::write(t.path().join("notes.txt"), b"hello").unwrap();
    fs::write(t.path().join("7.wal"), b"hello").unwrap();

    let (log, records, dropped) = reopen(&o);
    let expected: Vec<_> = written.iter().filter(|(p, _)| p.segment() != 2).cloned().collect();
    assert_eq!(records, expected);
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].segment(), 2);
    assert_eq!((dropped[0].offset(), dropped[0].bytes()), (0, file_len));
    assert_eq!(dropped[0].reason(), &DropReason::BadHeader("wrong magic"));
    drop(log);

    // A segment created but cut off before its header was written.
    let active = written.last().unwrap().0.segment() + 1;
    let empty = segment_path(t.path(), active + 5);
    fs::write(&empty, b"").unwrap();
    let (log, records, dropped) = reopen(&o);
    assert_eq!(records, expected);
    assert_eq!(dropped.len(), 2);
    assert_eq!(dropped[1].path(), empty);
    assert!(matches!(dropped[1].reason(), DropReason::BadHeader(_)));
    // Bad files are removed like any other closed segment.
    assert!(log.remove_through(active + 5).unwrap() >= file_len);
    assert!(!empty.exists() && !file.exists());
    assert!(t.path().join("notes.txt").exists());
}

#[test]
fn remove_through_frees_closed_segments_never_the_active_one() {
    let t = tmp();
    let o = small(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 60, 50);
    let active = log.active_segment();
    assert!(active >= 4);
    let before = log.stats();
    let on_disk: u64 = segment_files(t.path()).iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    assert_eq!(before.bytes_on_disk(), on_disk);

    assert_eq!(log.remove_through(0).unwrap(), 0);
    let size_1_2: u64 = (1..=2).map(|s| fs::metadata(segment_path(t.path(), s)).unwrap().len()).sum();
    assert_eq!(log.remove_through(2).unwrap(), size_1_2);
    assert!(!segment_path(t.path(), 1).exists() && !segment_path(t.path(), 2).exists());
    assert!(segment_path(t.path(), 3).exists());
    assert_eq!(log.stats().bytes_on_disk(), before.bytes_on_disk() - size_1_2);

    // Asking for everything removes everything but the active segment.
    let freed = run(log.remove_through_async(u64::MAX)).unwrap();
    assert!(freed > 0);
    assert_eq!(segment_files(t.path()), vec![segment_path(t.path(), active)]);
    let after = log.stats();
    assert_eq!(after.segments(), 1);
    assert_eq!(after.bytes_on_disk(), fs::metadata(segment_path(t.path(), active)).unwrap().len());
    assert_eq!(log.remove_through(u64::MAX).unwrap(), 0);

    // Appends go on in the active segment; recovery sees only what is left.
    let more = fill(&log, 100, 2, 10);
    log.close().unwrap();
    let (_log, records, _) = reopen(&o);
    let expected: Vec<_> = written.iter().filter(|(p, _)| p.segment() == active).cloned().chain(more).collect();
    assert_eq!(records, expected);
}

#[test]
fn max_bytes_fails_at_once_until_space_is_freed() {
    let t = tmp();
    let mut o = small(t.path());
    o.max_bytes = 4096;
    let (log, _) = Log::open(o.clone()).unwrap();
    let mut n = 0;
    let err = loop {
        match run(log.append(rec(n, 100))) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
        assert!(n < 100, "never full");
    };
    let WalError::Full { used, limit, needed } = err else { panic!("{err:?}") };
    assert_eq!((limit, needed), (4096, FRAME + 100));
    assert!(used + needed > limit);
    assert!(err.to_string().contains("full"), "{err}");
    let on_disk = log.stats().bytes_on_disk();
    assert!(on_disk <= 4096 + HEADER, "{on_disk}");

    // Refused at once: ready without waiting for the writer, nothing written.
    let r = now(log.append(rec(999, 100))).expect("Full is answered at once");
    assert!(matches!(r, Err(WalError::Full { .. })));
    assert_eq!(log.stats().bytes_on_disk(), on_disk);
    assert_eq!(log.stats().records_appended(), n as u64);

    log.remove_through(log.active_segment() - 1).unwrap();
    assert!(log.stats().bytes_on_disk() < on_disk);
    run(log.append(rec(1000, 100))).unwrap();
}

#[test]
fn too_large_record_fails_at_once() {
    let t = tmp();
    let mut o = Options::new(t.path());
    o.max_record = 100;
    let (log, _) = Log::open(o).unwrap();
    let r = now(log.append(vec![0; 101])).expect("answered at once");
    assert!(matches!(r, Err(WalError::TooLarge { len: 101, max: 100 })), "{r:?}");
    let r = now(log.append_many(vec![vec![1; 10], vec![0; 101]])).expect("answered at once");
    assert!(matches!(r, Err(WalError::TooLarge { .. })));
    assert_eq!(log.stats().records_appended(), 0);
    run(log.append(vec![0; 100])).unwrap();
}

#[test]
fn unwritable_directory_is_a_clear_error() {
    let t = tmp();
    let file = t.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    let dir = file.join("wal");
    let err = Log::open(Options::new(&dir)).unwrap_err();
    let WalError::Io { path, op, source } = &err else { panic!("{err:?}") };
    assert_eq!(path, &dir);
    assert_eq!(*op, "create directory");
    assert_eq!(source.kind(), ErrorKind::NotADirectory);
    let text = err.to_string();
    assert!(text.contains(&dir.display().to_string()) && text.contains("Not a directory"), "{text}");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn one_log_per_directory() {
    let t = tmp();
    let o = Options::new(t.path());
    let (log, _) = Log::open(o.clone()).unwrap();
    let err = Log::open(o.clone()).unwrap_err();
    assert!(matches!(err, WalError::InUse { .. }), "{err:?}");
    assert!(err.to_string().contains("in use"), "{err}");
    log.close().unwrap();
    Log::open(o).unwrap();
}

#[test]
fn close_flushes_and_later_appends_fail() {
    let t = tmp();
    let mut o = Options::new(t.path());
    o.sync = SyncMode::Never;
    let (log, _) = Log::open(o.clone()).unwrap();
    let other = log.clone();
    // Queued, not awaited: close still writes them.
    let pending: Vec<_> = (0..50).map(|i| log.append(rec(i, 10))).collect();
    log.close().unwrap();
    assert!(matches!(run(other.append(b"late".to_vec())), Err(WalError::Closed)));
    assert!(matches!(run(other.remove_through_async(1)), Err(WalError::Closed)));
    for p in pending {
        run(p).unwrap();
    }
    drop(other);
    let (_log, records, _) = reopen(&o);
    assert_eq!(records.len(), 50);
}

#[test]
fn crash_without_close_loses_nothing_written() {
    let t = tmp();
    let dir = t.path().join("live");
    let mut o = Options::new(&dir);
    o.segment_bytes = 1024;
    o.sync = SyncMode::Never;
    let (log, _) = Log::open(o.clone()).unwrap();
    let written = fill(&log, 0, 40, 40);

    // What a kill -9 leaves: the files as they are while the writer is alive
    // (acknowledged with `Never` means written), lock included.
    let copy = t.path().join("after-crash");
    fs::create_dir(&copy).unwrap();
    for e in fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        fs::copy(&p, copy.join(p.file_name().unwrap())).unwrap();
    }
    let mut c = o.clone();
    c.dir = copy;
    let (crashed, records, dropped) = reopen(&c);
    assert_eq!(records, written);
    assert!(dropped.is_empty());
    drop(crashed);

    // Dropping the last handle without close also leaves everything readable.
    drop(log);
    let (_log, records, _) = reopen(&o);
    assert_eq!(records, written);
}

#[test]
fn interval_mode_syncs_when_idle() {
    let t = tmp();
    let mut o = Options::new(t.path());
    o.sync = SyncMode::Interval(Duration::from_millis(20));
    let (log, _) = Log::open(o).unwrap();
    run(log.append(b"a".to_vec())).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while log.stats().syncs() == 0 {
        assert!(std::time::Instant::now() < deadline, "never synced");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(log.stats().syncs(), 1, "nothing more to sync");
}

/// Unmounts on drop, also when the test panics.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[test]
fn full_file_system_fails_with_enospc_then_recovers() {
    let t = tmp();
    let mnt = t.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount").args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"]).arg(&mnt).output();
    match mounted {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!("skipped: cannot mount a tmpfs (needs root): {}", String::from_utf8_lossy(&out.stderr).trim());
            return;
        }
        Err(e) => {
            eprintln!("skipped: cannot run mount: {e}");
            return;
        }
    }
    let _unmount = Unmount(mnt.clone());

    let mut o = Options::new(mnt.join("wal"));
    o.segment_bytes = 64 << 10;
    o.max_bytes = 1 << 30; // far above the file system's size
    let (log, _) = Log::open(o.clone()).unwrap();
    let mut acked = Vec::new();
    let err = run(async {
        for i in 0.. {
            let r = rec(i, 1000);
            match log.append(r.clone()).await {
                Ok(p) => acked.push((p, r)),
                Err(e) => return e,
            }
            assert!(i < 1000, "256 KiB never filled");
        }
        unreachable!()
    });
    assert_eq!(err.io_kind(), Some(ErrorKind::StorageFull), "{err:?}");
    assert!(err.to_string().contains("No space left on device"), "{err}");
    assert!(acked.len() > 100, "{} records before ENOSPC", acked.len());
    assert!(log.stats().io_errors() >= 1);

    // Space comes back: the same log takes appends again.
    let grown = Command::new("mount").args(["-o", "remount,size=1m"]).arg(&mnt).status().unwrap();
    assert!(grown.success());
    let r = b"after the disk was full".to_vec();
    let p = run(log.append(r.clone())).unwrap();
    acked.push((p, r));
    log.close().unwrap();

    // Every acknowledged record is there, and none of the failed one.
    let (log, records, dropped) = reopen(&o);
    assert_eq!(records, acked);
    assert!(dropped.is_empty(), "the failed write was cut off: {dropped:?}");
    log.close().unwrap();
}
