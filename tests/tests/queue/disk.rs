//! The queue's log on a disk that goes wrong: a record corrupted in the
//! middle of a segment, a segment torn inside its last request, a file
//! system that fills up, a directory that cannot be written, and settings
//! that `cumulo check` must refuse.
//!
//! The damage is done by hand to the files a real core wrote (and was
//! killed with SIGKILL over), reading the segment format of cumulo-wal: a
//! 24-byte header (`CUMULOWL`, version, number, checksum), then records
//! `[len u32 LE][crc32 u32 LE][payload]`; a queue record's payload starts
//! with its kind (1: a request, `Put`) and its id (u64 LE).

use crate::common::*;
use crate::recorder;
use cumulo_e2e::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Requests written before the log is damaged.
const N: usize = 300;
const SEGMENT_HEADER: usize = 24;
const FRAME: usize = 8;
/// The kind byte of a request's record (crates/queue/src/record.rs).
const PUT: u8 = 1;

/// Accepted mode; a delivery that fails (no destination yet) is tried
/// again only after a minute, and a thousand times at most: requests stay
/// in the log, neither delivered nor dead.
fn holding() -> Vec<(&'static str, String)> {
    vec![
        ("mode", q("accepted")),
        ("retry", "1000".into()),
        ("retry_delay_ms", "60000".into()),
        ("retry_max_delay_ms", "60000".into()),
    ]
}

/// As `holding`, but retried after 100 ms: a recovered request tried
/// before the recorder subscribed is soon tried again.
fn draining() -> Vec<(&'static str, String)> {
    vec![("mode", q("accepted")), ("retry", "1000".into()), ("retry_delay_ms", "100".into())]
}

/// Starts a core and waits until its queue at `/queue/` has opened its
/// log and subscribed (an internal service prints no ready line).
fn start(cfg: Config) -> Core {
    let core = Core::start(cfg);
    core.wait_lines(&["queue /queue/: log in", "requests recovered"], 1, Duration::from_secs(20));
    core
}

/// The number in `queue /queue/: log in D (N requests recovered)`.
fn recovered(core: &Core) -> usize {
    let line = core.wait_lines(&["queue /queue/: log in", "requests recovered"], 1, Duration::from_secs(20)).remove(0);
    let n = line.split(" (").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok());
    n.unwrap_or_else(|| panic!("no count of recovered requests in: {line}"))
}

fn kill9(core: &mut Core) {
    core.signal(libc::SIGKILL);
    assert!(core.wait_exit(ms(10_000)).is_some(), "the core did not die of SIGKILL");
}

/// Sends `body` to the queue for `/rec/x`, one at a time: the id the queue
/// answers, or the refusal.
fn enqueue(api: &mut Api, body: &[u8]) -> Result<u64, Error> {
    let r = api.send_sync("/queue/rec/x", b"", body, opts(10_000))?;
    let text = String::from_utf8_lossy(&r.body).into_owned();
    Ok(text.parse().unwrap_or_else(|_| panic!("the queue acknowledged with '{text}', not an id")))
}

/// One record of a segment file.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Where its frame starts in the file.
    offset: usize,
    /// Its payload's length.
    len: usize,
    kind: u8,
    /// The request it is about (every queue record starts with its id).
    id: u64,
}

/// Walks the records of an undamaged segment file from its header to its
/// end.
fn frames(file: &[u8]) -> Vec<Frame> {
    assert!(file.len() >= SEGMENT_HEADER && &file[..8] == b"CUMULOWL", "not a segment: {} bytes", file.len());
    let mut out = Vec::new();
    let mut at = SEGMENT_HEADER;
    while at < file.len() {
        assert!(at + FRAME <= file.len(), "the file ends inside the frame at {at}");
        let len = u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
        let payload = &file[at + FRAME..];
        assert!(len <= payload.len() && len >= 9, "a record of {len} bytes at {at} does not fit or has no id");
        let id = u64::from_le_bytes(payload[1..9].try_into().unwrap());
        out.push(Frame { offset: at, len, kind: payload[0], id });
        at += FRAME + len;
    }
    out
}

/// The segment files of a queue directory, in order.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    v.sort();
    v
}

/// A log of `N` acknowledged requests that a killed core left behind, with
/// no delivery done (the destination did not exist).
struct Written {
    dir: PathBuf,
    /// (id, body) in the order sent, which is the order of the ids.
    sent: Vec<(u64, String)>,
    /// The one segment holding them, and its records.
    segment: PathBuf,
    frames: Vec<Frame>,
}

impl Written {
    fn new(work: &TempDir) -> Written {
        let dir = work.0.join("queue");
        let mut core = start(Config::new().service(queue("/queue/", &dir, &holding())));
        let mut api = core.client();
        let mut sent = Vec::new();
        for i in 0..N {
            let body = format!("disk-{i:04}");
            let id = enqueue(&mut api, body.as_bytes()).unwrap_or_else(|e| panic!("request {i} refused: {e}"));
            sent.push((id, body));
        }
        kill9(&mut core);
        assert!(sent.windows(2).all(|w| w[0].0 < w[1].0), "ids not in the order sent: {sent:?}");
        let files = segments(&dir);
        assert_eq!(files.len(), 1, "{N} small requests should fit one segment: {files:?}");
        let segment = files[0].clone();
        let frames = frames(&std::fs::read(&segment).unwrap());
        let puts: Vec<u64> = frames.iter().filter(|f| f.kind == PUT).map(|f| f.id).collect();
        let ids: Vec<u64> = sent.iter().map(|(id, _)| *id).collect();
        assert_eq!(puts, ids, "the segment holds each acknowledged request once, in order");
        Written { dir, sent, segment, frames }
    }

    /// The record of request number `i` (in the order sent).
    fn put(&self, i: usize) -> Frame {
        let id = self.sent[i].0;
        *self.frames.iter().find(|f| f.kind == PUT && f.id == id).unwrap()
    }

    /// Starts a core on the damaged log, with the recorder as destination;
    /// checks that recovery reported `dropped` bytes from `offset` for
    /// `reason`, that the first `kept` requests are delivered and no other.
    fn recover(&self, work: &TempDir, kept: usize, offset: usize, dropped: usize, reason: &str) {
        let record = work.0.join("delivered.txt");
        let cfg = Config::new().service(recorder!("/rec/", record)).service(queue("/queue/", &self.dir, &draining()));
        let core = start(cfg);
        let path = self.segment.display().to_string();
        let lines = core.wait_lines(&["recovery dropped", &path], 1, Duration::from_secs(20));
        let want = format!("recovery dropped {dropped} bytes of {path} at offset {offset}: {reason}");
        assert!(lines.len() == 1 && lines[0].contains(&want), "wanted one line with '{want}', got {lines:?}");
        assert_eq!(recovered(&core), kept, "requests recovered");

        let (before, after) = self.sent.split_at(kept);
        wait_until("every request before the damage delivered", Duration::from_secs(60), || {
            let seen = recorded(&record);
            before.iter().all(|(_, body)| seen.contains_key(body))
        });
        // Drained, the damaged segment is deleted like any other (so that
        // no later start reports it again); the queue then holds nothing
        // from before, and what was delivered is all it will deliver.
        wait_until("the damaged segment deleted", Duration::from_secs(20), || !self.segment.exists());
        let seen = recorded(&record);
        let back: Vec<&str> = after.iter().filter(|(_, b)| seen.contains_key(b)).map(|(_, b)| b.as_str()).collect();
        assert!(back.is_empty(), "requests after the damage were delivered: {back:?}");
        let sent: HashSet<&str> = self.sent.iter().map(|(_, b)| b.as_str()).collect();
        let strangers: Vec<&String> = seen.keys().filter(|b| !sent.contains(b.as_str())).collect();
        assert!(strangers.is_empty(), "delivered but never sent: {strangers:?}");
        // Nothing was delivered before the damage, nor crashed during a
        // delivery since: each is delivered once.
        let twice: Vec<&String> = seen.iter().filter(|(_, n)| **n > 1).map(|(b, _)| b).collect();
        assert!(twice.is_empty(), "delivered more than once: {twice:?}");
        eprintln!(
            "{kept} of {N} delivered after {reason} at offset {offset}; {} deliveries in all",
            seen.values().sum::<u32>()
        );
    }
}

#[test]
fn a_corrupted_record_in_the_middle_of_a_segment_drops_it_and_the_rest_of_that_segment() {
    let work = TempDir::new();
    let w = Written::new(&work);
    let middle = N / 2;
    let bad = w.put(middle);
    let mut file = std::fs::read(&w.segment).unwrap();
    // A byte in the middle of the payload: the frame's length stays good,
    // only its checksum tells.
    file[bad.offset + FRAME + bad.len / 2] ^= 0x5a;
    std::fs::write(&w.segment, &file).unwrap();
    w.recover(&work, middle, bad.offset, file.len() - bad.offset, "bad checksum");
}

#[test]
fn a_segment_torn_inside_its_last_request_loses_only_that_one() {
    let work = TempDir::new();
    let w = Written::new(&work);
    // The segment may end with attempt records (started, failed) of the
    // last deliveries tried; a crash during the last request's write
    // leaves the file ending inside that request instead.
    let last = w.put(N - 1);
    let trailing = w.frames.iter().filter(|f| f.offset > last.offset).count();
    eprintln!("torn inside the last request; {trailing} attempt records after it cut off too");
    let cut = last.offset + FRAME + last.len / 2;
    std::fs::OpenOptions::new().write(true).open(&w.segment).unwrap().set_len(cut as u64).unwrap();
    w.recover(&work, N - 1, last.offset, cut - last.offset, "torn tail");
}

/// A small tmpfs mounted at a path, unmounted on drop (also on a panic).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, options: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", options, "tmpfs"]).arg(at).output();
        match out {
            Ok(o) if o.status.success() => Tmpfs(at.to_path_buf()),
            Ok(o) => panic!(
                "cannot mount a tmpfs at {} (this test needs root): {}",
                at.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("cannot run mount: {e}"),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.0).status().is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// A request of 4 KiB, numbered.
fn body4k(i: usize) -> String {
    let mut b = format!("full-{i:05}-").into_bytes();
    b.resize(4096, b'x');
    String::from_utf8(b).unwrap()
}

/// Queue settings for a 512 KiB file system: the log may grow far past
/// it (64 MiB), so the disk is the limit; small (the smallest) segments.
fn on_tmpfs(mut settings: Vec<(&'static str, String)>) -> Vec<(&'static str, String)> {
    settings.push(("max_bytes", (64u64 << 20).to_string()));
    settings.push(("segment_bytes", (64u64 << 10).to_string()));
    settings
}

/// Sends requests of 4 KiB to a queue in `dir` (on a 512 KiB tmpfs) until
/// one is refused QUEUE_FULL for the full disk, sends one more of that
/// size (refused too), and kills the core with SIGKILL. The bodies
/// acknowledged and the two refused.
fn fill_disk(dir: &Path) -> (Vec<String>, [String; 2]) {
    let mut core = start(Config::new().service(queue("/queue/", dir, &on_tmpfs(holding()))));
    let mut api = core.client();
    let mut acked = Vec::new();
    let why = loop {
        let i = acked.len();
        assert!(i < 1000, "512 KiB took 1000 requests of 4 KiB");
        match enqueue(&mut api, body4k(i).as_bytes()) {
            Ok(_) => acked.push(body4k(i)),
            Err(e) if e.status() == Some(Status::QueueFull) => break e.to_string(),
            Err(e) => panic!("request {i} refused, but not as QUEUE_FULL: {e}"),
        }
    };
    eprintln!("{} requests of 4 KiB acknowledged on a 512 KiB tmpfs, then: {why}", acked.len());
    assert!(why.contains("the disk of its log is full"), "not the full disk: {why}");
    assert!(why.contains("No space left on device"), "not ENOSPC: {why}");
    assert!(acked.len() >= 60, "only {} requests of 4 KiB fit 512 KiB", acked.len());
    // Still full: the next one of that size is refused the same way (a
    // smaller one may still fit the active segment's last page).
    let refused = [body4k(acked.len()), body4k(acked.len() + 1)];
    let again = enqueue(&mut api, refused[1].as_bytes()).map_err(|e| e.to_string());
    assert!(again.as_ref().is_err_and(|e| e.contains("the disk of its log is full")), "then: {again:?}");
    kill9(&mut core);
    (acked, refused)
}

/// A new core on the queue in `dir`, with the recorder as destination,
/// delivers exactly the acknowledged requests.
fn deliver_all(work: &TempDir, dir: &Path, acked: &[String], refused: &[String]) {
    let record = work.0.join("delivered.txt");
    let old = segments(dir);
    let cfg = Config::new().service(recorder!("/rec/", record)).service(queue("/queue/", dir, &on_tmpfs(draining())));
    let core = start(cfg);
    assert_eq!(recovered(&core), acked.len(), "requests recovered after the full disk");
    wait_until("every acknowledged request delivered", Duration::from_secs(60), || {
        let seen = recorded(&record);
        acked.iter().all(|b| seen.contains_key(b))
    });
    // Once the segments written before are deleted, nothing of theirs is
    // held any more: what was delivered is all there is.
    wait_until("the drained segments deleted", Duration::from_secs(20), || old.iter().all(|p| !p.exists()));
    let seen = recorded(&record);
    for b in refused {
        let head = &b[..11];
        assert!(!seen.contains_key(b), "the refused request {head} was delivered ('nothing was stored', it said)");
    }
    assert_eq!(seen.len(), acked.len(), "delivered: exactly the acknowledged requests");
    let twice = seen.values().filter(|n| **n > 1).count();
    assert_eq!(twice, 0, "{twice} requests delivered more than once without a crash during delivery");
}

#[test]
fn a_full_disk_answers_queue_full_and_keeps_every_acknowledged_request() {
    let work = TempDir::new();
    let mnt = work.0.join("mnt");
    let _tmpfs = Tmpfs::mount(&mnt, "size=512k");
    let dir = mnt.join("queue");
    let (acked, refused) = fill_disk(&dir);
    // The operator makes room; the queue's files are as the killed core
    // left them.
    let grown = Command::new("mount").args(["-o", "remount,size=2m"]).arg(&mnt).status().expect("run mount");
    assert!(grown.success(), "cannot grow the tmpfs");
    deliver_all(&work, &dir, &acked, &refused);
}

/// The same, without making room first: the new core has to read and
/// deliver a log whose file system is still full (which frees its
/// segments).
#[test]
fn a_core_restarted_on_a_still_full_disk_delivers_every_acknowledged_request() {
    let work = TempDir::new();
    let mnt = work.0.join("mnt");
    let _tmpfs = Tmpfs::mount(&mnt, "size=512k");
    let dir = mnt.join("queue");
    let (acked, refused) = fill_disk(&dir);
    deliver_all(&work, &dir, &acked, &refused);
}

/// Runs `cumulo run` on a config whose queue directory is `dir`; it must
/// fail within a few seconds. Its output.
fn run_must_fail(work: &TempDir, dir: &Path) -> String {
    let config = work.0.join("cumulo.toml");
    let socket = work.0.join("core.sock");
    let cfg = Config::new().service(queue("/queue/", dir, &[("mode", q("accepted"))]));
    std::fs::write(&config, cfg.render(socket.to_str().unwrap())).unwrap();
    let log = work.0.join("run.log");
    let out = std::fs::File::create(&log).unwrap();
    let started = Instant::now();
    let mut child = cumulo_cmd()
        .arg("run")
        .arg("--config")
        .arg(&config)
        .current_dir(&work.0)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("run cumulo");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cumulo run did not stop within 10 s; output:\n{}", std::fs::read_to_string(&log).unwrap());
        }
        std::thread::sleep(ms(20));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "cumulo run succeeded with an unusable queue directory; output:\n{text}");
    eprintln!("cumulo run stopped after {:?} with {status}", started.elapsed());
    text
}

#[test]
fn a_queue_directory_under_a_regular_file_stops_the_start() {
    let work = TempDir::new();
    let file = work.0.join("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let dir = file.join("queue");
    let text = run_must_fail(&work, &dir);
    let want = format!("queue: cannot create settings.dir {}", dir.display());
    assert!(text.contains(&want), "wanted '{want}' in:\n{text}");
    assert!(text.contains("service[0] (/queue/)"), "the service is not named:\n{text}");
}

#[test]
fn a_read_only_queue_directory_stops_the_start() {
    let work = TempDir::new();
    // root writes anywhere permissions forbid; a read-only mount stops it.
    let dir = work.0.join("ro");
    let _tmpfs = Tmpfs::mount(&dir, "ro,size=64k");
    let text = run_must_fail(&work, &dir);
    let want = format!("queue: settings.dir {} is not writable", dir.display());
    assert!(text.contains(&want), "wanted '{want}' in:\n{text}");
    assert!(text.contains("Read-only file system"), "the cause is not given:\n{text}");
}

/// `cumulo check` on a config with this one service: its exit code and
/// what it said.
fn check(work: &TempDir, name: &str, service: Service) -> (Option<i32>, String) {
    let config = work.0.join(format!("{name}.toml"));
    std::fs::write(&config, Config::new().service(service).render("/tmp/unused.sock")).unwrap();
    let out = cumulo_cmd().arg("check").arg("--config").arg(&config).output().expect("run cumulo check");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn bad_queue_settings_are_refused_by_check_naming_the_field() {
    let work = TempDir::new();
    let dir = work.0.join("queue");
    let base =
        || Service::internal("/queue/", "queue").set("settings", format!("{{ dir = {} }}", q(dir.to_str().unwrap())));
    let with = |extra: &str| {
        Service::internal("/queue/", "queue")
            .set("settings", format!("{{ dir = {}, {extra} }}", q(dir.to_str().unwrap())))
    };

    // The same queue, valid: what the refusals below differ from.
    let (code, text) = check(&work, "good", base());
    assert_eq!(code, Some(0), "a valid queue refused: {text}");
    assert!(text.contains("valid (1 services)"), "{text}");
    assert!(!dir.exists(), "check created the queue directory");
    let (code, text) = check(&work, "good-settings", with("sync = \"interval\", sync_interval_ms = 5"));
    assert_eq!(code, Some(0), "a valid queue refused: {text}");

    let refused = |name: &str, service: Service, needles: &[&str]| {
        let (code, text) = check(&work, name, service);
        assert_eq!(code, Some(1), "{name}: cumulo check did not exit 1: {text}");
        for n in needles {
            assert!(text.contains(n), "{name}: '{n}' not in: {text}");
        }
        assert!(!dir.exists(), "{name}: check created the queue directory");
    };
    refused(
        "unknown",
        with("nope = 1"),
        &["service[0] (/queue/).settings", "queue: unknown setting 'nope'", "known: backend, dir"],
    );
    refused(
        "sync",
        with("sync = \"sometimes\""),
        &["service[0] (/queue/).settings", "settings.sync 'sometimes' is unknown", "always, interval, never"],
    );
    refused(
        "no-dir",
        Service::internal("/queue/", "queue").set("settings", "{ mode = \"accepted\" }"),
        &["service[0] (/queue/).settings", "settings.dir is required"],
    );
    refused(
        "segment",
        with("segment_bytes = 1024"),
        &["service[0] (/queue/).settings", "settings.segment_bytes must be an integer in 65536"],
    );
    refused(
        "processes",
        base().set("count_process", 2),
        &["service[0] (/queue/).count_process", "count_process and count_thread must be 1"],
    );
    refused(
        "threads",
        base().set("count_thread", 2),
        &["service[0] (/queue/).count_process", "count_thread must be 1"],
    );
}
