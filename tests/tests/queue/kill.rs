//! Nothing acknowledged is lost: the core is killed with SIGKILL ten times
//! while a client sends 20,000 requests through a file queue with
//! `sync = "always"` (three times with 6,000 for `interval` and `never`),
//! and a destination records every request it gets.

use crate::common::*;
use crate::recorder;
use cumulo_e2e::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Requests the client keeps in flight.
const WINDOW: usize = 64;
/// Deliveries the queue runs at once (its `max_in_flight`).
const DELIVERIES: u32 = 32;

/// Sends ids from `next` on, `WINDOW` at a time, until `total` are
/// acknowledged (true) or the core goes away (false). Once `kill_after`
/// more are acknowledged, the core (`pid`) is killed with SIGKILL, with the
/// window full. An answer other than OK fails the test: nothing here
/// should be refused.
fn send(api: &mut Api, next: &mut u64, acked: &mut Vec<u64>, total: usize, kill: Option<(u32, usize)>) -> bool {
    let mut pending = HashMap::new();
    let kill_at = kill.map(|(pid, after)| (pid, acked.len() + after));
    loop {
        if let Some((pid, at)) = kill_at {
            if acked.len() >= at {
                kill9(pid);
            }
        }
        while pending.len() < WINDOW && acked.len() + pending.len() < total {
            let id = *next;
            *next += 1;
            let tid = api.send_async("/queue/rec/x", b"", id.to_string().as_bytes(), opts(10_000));
            pending.insert(tid, id);
        }
        if pending.is_empty() {
            return true;
        }
        match api.recv_async(None, ms(5000)) {
            Ok(Some((tid, Ok(_)))) => acked.extend(pending.remove(&tid)),
            Ok(Some((_, Err(e)))) => panic!("the queue refused a request: {e}"),
            Ok(None) => return false, // a killed core may leave the socket open a moment
            Err(_) => return false,
        }
    }
}

fn kill9(pid: u32) {
    let st = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(st.success(), "kill -9 {pid}");
}

#[test]
fn ten_kills_of_the_core_lose_no_acknowledged_request() {
    kills_lose_nothing("always", 10, 20_000);
}

/// `write(2)` before the acknowledgement is enough for a crash of the core
/// (the kernel has the bytes); only a crash of the machine needs fdatasync.
#[test]
fn kills_of_the_core_lose_nothing_with_sync_interval_or_never() {
    kills_lose_nothing("interval", 3, 6_000);
    kills_lose_nothing("never", 3, 6_000);
}

/// `kills` SIGKILLs of the core while `total` requests go through a queue
/// with this `sync`; then every acknowledged request must be delivered.
fn kills_lose_nothing(sync: &str, kills: u32, total: usize) {
    let work = TempDir::new();
    let record = work.0.join("delivered.txt");
    let settings = [
        ("mode", q("accepted")),
        ("sync", q(sync)),
        ("max_in_flight", DELIVERIES.to_string()),
        ("retry", "20".to_string()),
    ];
    let cfg = Config::new().service(recorder!("/rec/", record).set("count_process", 2)).service(queue(
        "/queue/",
        &work.0.join("queue"),
        &settings,
    ));
    let (mut next, mut acked) = (1u64, Vec::new());
    let started = Instant::now();
    for round in 0..kills {
        let mut core = Core::start(cfg.clone());
        let mut api = core.client();
        // Killed under load, after 1,200 .. 2,000 acknowledgements.
        let after = 1200 + fastrand::usize(0..800);
        let before = acked.len();
        let finished = send(&mut api, &mut next, &mut acked, total, Some((core.pid, after)));
        assert!(!finished, "all acknowledged before the kill of round {round}");
        assert!(core.wait_exit(ms(10_000)).is_some(), "the core did not die");
        eprintln!(
            "round {round}: killed after {after} acknowledgements; {} acknowledged in it, {} in all; {} sent",
            acked.len() - before,
            acked.len(),
            next - 1
        );
    }
    // The last core lives: the client finishes, and everything drains.
    let core = Core::start(cfg.clone());
    let mut api = core.client();
    while acked.len() < total {
        assert!(send(&mut api, &mut next, &mut acked, total, None), "the last core went away; log:\n{}", core.log());
    }
    let wanted: Vec<String> = acked.iter().map(u64::to_string).collect();
    wait_until("every acknowledged request delivered", Duration::from_secs(120), || {
        let seen = recorded(&record);
        wanted.iter().all(|id| seen.contains_key(id))
    });
    let seen = recorded(&record);
    let lost: Vec<&String> = wanted.iter().filter(|id| !seen.contains_key(*id)).collect();
    let duplicates: u32 = seen.values().map(|n| n - 1).sum();
    let in_doubt = (next - 1) as usize - total;
    eprintln!(
        "sync {sync}: {total} acknowledged through {kills} kills in {:?}: {} lost, {duplicates} delivered twice or more, {in_doubt} \
         sent but never acknowledged ({} of them delivered)",
        started.elapsed(),
        lost.len(),
        (total as u64 + 1..next).filter(|id| seen.contains_key(&id.to_string())).count()
    );
    assert!(lost.is_empty(), "acknowledged but never delivered: {lost:?}");
    // A duplicate is a delivery whose end the log had not recorded when the
    // core died: at most the deliveries in flight and the records of one
    // unsynced batch at each kill.
    let bound = kills * (2 * DELIVERIES);
    assert!(duplicates <= bound, "{duplicates} duplicates, more than {bound} ({kills} kills x 2 x {DELIVERIES})");
}
