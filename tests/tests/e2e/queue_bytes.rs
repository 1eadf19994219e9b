//! Requests waiting in the core (queued for an instance, parked for a
//! subscriber) are bounded in bytes as well as in count: per instance
//! (`queue_size`), per sender (`core.max_sender_queued_bytes`) and in all
//! (`core.max_queued_bytes`); past a bound, QUEUE_FULL at once, naming it.
//! A sender that goes away takes its waiting requests with it.

use cumulo_e2e::raw::{self, Raw};
use cumulo_e2e::*;
use std::time::{Duration, Instant};

const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;

/// A raw instance under `/raw/` subscribed to `x`, window 1: it takes one
/// request and answers only when told to.
fn raw_instance(core: &Core) -> Raw {
    let mut r = Raw::connect(&core.socket);
    r.handshake(1, "/raw/");
    assert_eq!(r.subscribe(1, "x"), 0);
    r
}

/// Answers the next request the raw instance gets.
fn answer_one(r: &mut Raw) -> raw::Request {
    let (t, b) = r.frame(Duration::from_secs(10));
    assert_eq!(t, raw::REQUEST);
    let req = raw::parse_request(&b);
    r.write(&raw::ret(&req.trans_id, 0, b"ok"));
    req
}

/// Asserts the raw instance gets no request within `wait`.
fn gets_no_request(r: &mut Raw, wait: Duration) {
    let end = Instant::now() + wait;
    while Instant::now() < end {
        match r.read(end.saturating_duration_since(Instant::now())) {
            raw::Got::Frame(raw::PING, _) | raw::Got::Nothing => {}
            other => panic!("expected no request, got {other:?}"),
        }
    }
}

fn long() -> SendOptions {
    opts(60_000)
}

fn parked() -> SendOptions {
    SendOptions { timeout: 60_000, wait_for_service: true, ..Default::default() }
}

/// `n` async sends of `size` bytes each.
fn send_n(api: &mut Api, name: &str, n: usize, size: usize, o: SendOptions) -> Vec<cumulo::TransId> {
    let body = vec![b'q'; size];
    let tids = (0..n).map(|_| api.send_async(name, b"", &body, o)).collect();
    api.flush().unwrap();
    tids
}

/// A send that must be refused at once with QUEUE_FULL naming `key`.
fn refused(api: &mut Api, name: &str, size: usize, o: SendOptions, key: &str) {
    let t = Instant::now();
    let r = api.send_sync(name, b"", &vec![b'r'; size], o);
    assert_eq!(status(&r), Status::QueueFull, "{r:?}");
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains(key), "{msg}");
    assert!(t.elapsed() < ms(1000), "refused after {:?}", t.elapsed());
}

#[test]
fn a_queue_is_full_at_queue_size_bytes() {
    let core = Core::start(Config::new().unmanaged("queue_size", MIB));
    let mut inst = raw_instance(&core);
    let mut api = core.client();
    // One delivered, then ten of ~100 KiB fill 1 MiB of queue.
    let tids = send_n(&mut api, "/raw/x", 11, 100 * KIB, long());
    refused(&mut api, "/raw/x", 100 * KIB, long(), "queue_size");
    // A small one still fits; the others are served in turn.
    for _ in 0..11 {
        answer_one(&mut inst);
    }
    for tid in tids {
        let (_, r) = api.recv_async(Some(tid), Duration::from_secs(10)).unwrap().expect("an answer");
        assert!(r.is_ok(), "{r:?}");
    }
}

#[test]
fn one_sender_is_capped_at_max_sender_queued_bytes_and_the_others_still_queue() {
    let core = Core::start(
        Config::new().core("max_frame", MIB).core("max_sender_queued_bytes", MIB).core("max_queued_bytes", 4 * MIB),
    );
    let mut inst = raw_instance(&core);
    let mut greedy = core.client();
    let mut other = core.client_with_prefix("/other/");
    let mine = send_n(&mut greedy, "/raw/x", 11, 100 * KIB, long());
    refused(&mut greedy, "/raw/x", 100 * KIB, long(), "max_sender_queued_bytes");
    // Parked requests count against the same allowance.
    refused(&mut greedy, "/later/x", 100 * KIB, parked(), "max_sender_queued_bytes");
    let theirs = send_n(&mut other, "/raw/x", 5, 100 * KIB, long());
    for _ in 0..16 {
        answer_one(&mut inst);
    }
    for (api, tids) in [(&mut greedy, mine), (&mut other, theirs)] {
        for tid in tids {
            let (_, r) = api.recv_async(Some(tid), Duration::from_secs(10)).unwrap().expect("an answer");
            assert!(r.is_ok(), "{r:?}");
        }
    }
}

#[test]
fn the_core_is_capped_at_max_queued_bytes() {
    let core = Core::start(
        Config::new().core("max_frame", MIB).core("max_sender_queued_bytes", MIB).core("max_queued_bytes", 2 * MIB),
    );
    let _inst = raw_instance(&core);
    let mut a = core.client_with_prefix("/a/");
    let mut b = core.client_with_prefix("/b/");
    let mut c = core.client_with_prefix("/c/");
    send_n(&mut a, "/raw/x", 10, 100 * KIB, long());
    send_n(&mut b, "/later/x", 9, 100 * KIB, parked());
    // a and b hold ~1.8 MiB of the 2: c's 300 KiB do not fit.
    refused(&mut c, "/raw/x", 300 * KIB, long(), "max_queued_bytes");
    refused(&mut c, "/later/x", 300 * KIB, parked(), "max_queued_bytes");
}

#[test]
fn a_sender_that_goes_away_takes_its_queued_and_parked_requests_with_it() {
    let core = Core::start(
        Config::new().core("max_frame", MIB).core("max_sender_queued_bytes", MIB).core("max_queued_bytes", MIB),
    );
    let mut inst = raw_instance(&core);
    let mut gone = core.client_with_prefix("/gone/");
    send_n(&mut gone, "/raw/x", 7, 100 * KIB, long()); // 1 delivered, 6 queued
    send_n(&mut gone, "/later/x", 3, 100 * KIB, parked());
    let mut stays = core.client_with_prefix("/stays/");
    refused(&mut stays, "/raw/x", 200 * KIB, long(), "max_queued_bytes");
    drop(gone);
    // Its bytes are free again as soon as the core sees it close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = stays.send_sync("/raw/x", b"", &vec![b's'; 200 * KIB], opts(300));
        match status(&r) {
            Status::Timeout => break, // queued behind the request inst holds
            Status::QueueFull if Instant::now() < deadline => std::thread::sleep(ms(50)),
            s => panic!("expected the request queued (then TIMEOUT), got {s:?}: {r:?}"),
        }
    }
    core.wait_lines(&["went away: dropped the 9 requests it had waiting"], 1, ms(1000));
    // inst answers what it held; nothing of the gone sender comes after,
    // nor to a late subscriber of what it had parked.
    answer_one(&mut inst);
    let mut late = Raw::connect(&core.socket);
    late.handshake(8, "/later/");
    assert_eq!(late.subscribe(1, "x"), 0);
    gets_no_request(&mut inst, ms(1000));
    gets_no_request(&mut late, ms(10));
    // And inst still serves the others.
    let t = stays.send_async("/raw/x", b"", b"after", long());
    stays.flush().unwrap();
    assert_eq!(answer_one(&mut inst).body, b"after");
    assert!(stays.recv_async(Some(t), Duration::from_secs(5)).unwrap().unwrap().1.is_ok());
}

/// VmRSS of a process, bytes.
fn rss(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

#[test]
fn floods_of_queued_and_parked_requests_leave_the_core_memory_bounded() {
    let core = Core::start(Config::new().core("max_queued_bytes", 64 * MIB).core("max_sender_queued_bytes", 32 * MIB));
    let _inst = raw_instance(&core); // takes one request, answers none
    let before = rss(core.pid);
    let mut queued = core.client_with_prefix("/q/");
    let mut waiting = core.client_with_prefix("/w/");
    // 512 MB offered: 256 requests of 1 MiB for a service that never
    // answers, as many for a name nobody serves.
    let q = send_n(&mut queued, "/raw/x", 256, MIB, long());
    let w = send_n(&mut waiting, "/nobody/x", 256, MIB, parked());
    std::thread::sleep(ms(1000)); // every refusal is in by now
    let mut full = 0;
    for (api, tids) in [(&mut queued, q), (&mut waiting, w)] {
        for tid in tids {
            if let Some((_, r)) = api.recv_async(Some(tid), ms(1)).unwrap() {
                assert_eq!(status(&r), Status::QueueFull, "{r:?}");
                full += 1;
            }
        }
    }
    let grown = rss(core.pid).saturating_sub(before);
    assert!(full >= 2 * 256 - 2 * 33, "only {full} refused");
    assert!(grown < 160 * MIB, "the core's RSS grew by {} MB", grown / MIB);
}
