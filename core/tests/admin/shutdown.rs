//! SIGTERM: the core stops taking requests, fails queued ones with
//! SHUTTING_DOWN, lets requests in flight get their answer, stops every
//! process and exits 0. No request is left without an answer.

use crate::common::*;
use cumulo::{Answer, SendOptions, Status};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

#[test]
fn sigterm_drains_then_exits_zero() {
    let mut core = TestCore::start(&http_req_service(2));
    core.wait_running(1, 2);
    core.wait_subscribed("/tests/http_req/rust.xml/get", 2);

    // a slow unmanaged instance: each request takes 300 ms
    let socket = core.socket.display().to_string();
    let (subscribed, ready) = std::sync::mpsc::channel();
    let slow_thread = std::thread::spawn(move || {
        let mut slow = cumulo::Api::connect(cumulo::Options::unmanaged(socket, "/slow/")).unwrap();
        slow.subscribe("work", |_, _| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(Answer::body("done"))
        })
        .unwrap();
        subscribed.send(()).unwrap();
        while slow.poll(None).unwrap_or(false) {}
    });
    ready.recv().unwrap();

    let mut client = core.client("/test/client/");
    let opts = SendOptions { timeout: 20_000, ..Default::default() };
    let slow_ids: Vec<_> = (0..4).map(|_| client.send_async("/slow/work", b"", b"", opts)).collect();
    let mut fast = HashSet::new();
    for n in 0..1500 {
        fast.insert(client.send_async("/tests/http_req/rust.xml/get", b"", &value_request(n), opts));
    }
    client.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100)); // the first slow request is being handled
    core.sigterm();
    // while it drains, new requests are refused at once
    std::thread::sleep(Duration::from_millis(50));
    let late: Vec<_> =
        (0..10).map(|_| client.send_async("/tests/http_req/rust.xml/get", b"", &value_request(1), opts)).collect();

    let mut outcomes: BTreeMap<String, u64> = BTreeMap::new();
    let mut slow_outcomes = Vec::new();
    let mut late_outcomes = Vec::new();
    for _ in 0..(slow_ids.len() + fast.len() + late.len()) {
        let (tid, r) = client
            .recv_async(None, Duration::from_secs(10))
            .expect("the connection stays up until every answer is written")
            .expect("every request is answered");
        let what = match &r {
            Ok(_) => "OK".to_string(),
            Err(cumulo::Error::Status { status, .. }) => status.name().to_string(),
            Err(e) => panic!("not an explicit answer: {e}"),
        };
        if slow_ids.contains(&tid) {
            slow_outcomes.push((tid, what.clone()));
        } else if late.contains(&tid) {
            late_outcomes.push(what.clone());
        } else {
            assert!(fast.remove(&tid));
        }
        *outcomes.entry(what).or_default() += 1;
    }
    assert!(fast.is_empty());
    let status = core.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "{}", core.log_text());
    slow_thread.join().unwrap();

    // in flight: answered; queued behind it: SHUTTING_DOWN
    let first = slow_outcomes.iter().find(|(t, _)| *t == slow_ids[0]).unwrap();
    assert_eq!(first.1, "OK", "{slow_outcomes:?}");
    for (t, what) in &slow_outcomes {
        if *t != slow_ids[0] {
            assert_eq!(what, Status::ShuttingDown.name());
        }
    }
    assert_eq!(late_outcomes, vec!["SHUTTING_DOWN"; 10]);
    assert!(outcomes.keys().all(|k| ["OK", "SHUTTING_DOWN", "CRASHED"].contains(&k.as_str())), "{outcomes:?}");
    eprintln!("outcomes: {outcomes:?}");
    let log = core.log_text();
    assert!(log.contains("SIGTERM: shutting down"), "{log}");
    assert!(log.contains("process 0 exited with code 0") && log.contains("process 1 exited with code 0"), "{log}");
    assert!(log.contains("stopped; requests"));
    assert!(!core.socket.exists(), "the socket file is removed");
}

#[test]
fn a_request_nobody_answers_fails_explicitly_at_the_terminate_timeout() {
    let mut core = TestCore::start("");
    let mut silent = core.client("/silent/");
    silent.subscribe("x", |_, _| Ok(Answer::body(""))).unwrap(); // never polls: never answers
    let mut client = core.client("/test/client/");
    let tid = client.send_async("/silent/x", b"", b"", SendOptions { timeout: 60_000, ..Default::default() });
    client.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = std::time::Instant::now();
    core.sigterm();
    let (got, r) = client.recv_async(None, Duration::from_secs(10)).unwrap().expect("answered before the core exits");
    assert_eq!(got, tid);
    match r {
        Err(cumulo::Error::Status { status: Status::ShuttingDown, message }) => {
            assert!(message.contains("terminate timeout"), "{message}")
        }
        other => panic!("expected SHUTTING_DOWN, got {other:?}"),
    }
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(1900) && waited < Duration::from_secs(6), "{waited:?}");
    assert_eq!(core.wait_exit(Duration::from_secs(10)).code(), Some(0));
    drop(silent);
}
