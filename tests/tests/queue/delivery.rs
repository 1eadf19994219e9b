//! What the queue does with each request: modes, retries, dead letters,
//! deduplication, limits, and a destination whose processes are killed.

use crate::common::*;
use crate::recorder;
use cumulo_e2e::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[test]
fn destination_mode_answers_with_the_destinations_answer() {
    let work = TempDir::new();
    let core = Core::start(Config::new().service(ts!("/dest/")).service(queue("/q/", &work.0, &[])));
    let mut api = core.client();
    let r = api.send_sync("/q/dest/hello", b"k\0v\0", b"body", opts(5000)).unwrap();
    assert_eq!(r.body, b"body");
    assert_eq!(field(&r, "name"), "/dest/hello", "delivered to the name after the queue's prefix");
    assert!(field(&r, "queue-id").parse::<u64>().is_ok_and(|id| id > 0));
}

#[test]
fn accepted_mode_acknowledges_with_an_id_and_sends_the_answer_to_reply_to() {
    let work = TempDir::new();
    let s = [("mode", q("accepted"))];
    let core = Core::start(Config::new().service(ts!("/dest/")).service(queue("/q/", &work.0, &s)));
    let (mut replies, got) = subscriber(&core, "/replies/");
    let mut api = core.client();
    let r = api.send_sync("/q/dest/x", b"reply_to\0/replies/one\0", b"work", opts(5000)).unwrap();
    let id = field(&r, "queue-id");
    assert_eq!(r.body, id.as_bytes());
    poll_until(&mut replies, &got, 1, ms(10_000));
    let (name, ri, body) = got.borrow()[0].clone();
    assert_eq!(name, "/replies/one");
    assert_eq!((ri["queue-id"].as_str(), ri["queue-status"].as_str()), (id.as_str(), "OK"));
    assert_eq!(ri["queue-destination"], "/dest/x");
    assert_eq!(body, b"work", "the destination's answer (the test service echoes)");
}

#[test]
fn an_idempotency_key_within_the_window_is_stored_and_delivered_once() {
    let work = TempDir::new();
    let record = work.0.join("got.txt");
    let s = [("mode", q("accepted"))];
    let core =
        Core::start(Config::new().service(recorder!("/dest/", record)).service(queue("/q/", &work.0.join("q"), &s)));
    let mut api = core.client();
    let first = api.send_sync("/q/dest/x", b"idempotency-key\0order-7\0", b"once", opts(5000)).unwrap();
    let again = api.send_sync("/q/dest/x", b"idempotency-key\0order-7\0", b"once", opts(5000)).unwrap();
    let other = api.send_sync("/q/dest/x", b"idempotency-key\0order-8\0", b"other", opts(5000)).unwrap();
    assert_eq!(field(&again, "queue-id"), field(&first, "queue-id"));
    assert_eq!(field(&again, "queue-duplicate"), "1");
    assert_ne!(field(&other, "queue-id"), field(&first, "queue-id"));
    wait_until("both delivered", ms(10_000), || recorded(&record).len() == 2);
    std::thread::sleep(ms(300));
    assert_eq!(recorded(&record).get("once"), Some(&1), "the duplicate is not delivered again");
}

#[test]
fn failed_attempts_are_retried_then_dead_lettered_with_their_history() {
    let work = TempDir::new();
    // The destination never answers: every attempt times out (200 ms).
    let s = [
        ("mode", q("accepted")),
        ("retry", "2".into()),
        ("retry_delay_ms", "50".into()),
        ("timeout_ms", "200".into()),
        ("dead_letter", q("/dead/letters")),
    ];
    let cfg = Config::new().service(ts!("/hang/").mode("hang")).service(queue("/q/", &work.0, &s));
    let core = Core::start(cfg);
    let (mut dead, got) = subscriber(&core, "/dead/");
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/q/hang/x", b"mine\0yes\0", b"doomed", opts(5000)).unwrap();
    poll_until(&mut dead, &got, 1, ms(10_000));
    let took = t.elapsed();
    let (name, ri, body) = got.borrow()[0].clone();
    assert_eq!((name.as_str(), body.as_slice()), ("/dead/letters", &b"doomed"[..]));
    assert_eq!(ri["queue-id"], field(&r, "queue-id"));
    assert_eq!(ri["queue-destination"], "/hang/x");
    assert_eq!(ri["queue-attempts"], "3", "retry = 2: three attempts");
    assert_eq!(ri["mine"], "yes", "the request's own request_info goes with it");
    let history: Vec<&str> = ri["queue-history"].split(',').collect();
    assert_eq!(history.len(), 3, "{history:?}");
    for (i, h) in history.iter().enumerate() {
        assert!(h.starts_with(&format!("{}:TIMEOUT@", i + 1)), "{history:?}");
    }
    // 3 x 200 ms attempts and 2 x ~50 ms delays.
    assert!(took >= ms(650), "dead-lettered after {took:?}");
}

#[test]
fn dead_letters_are_listed_replayed_and_purged() {
    let work = TempDir::new();
    let port = free_port();
    let s = [("mode", q("accepted")), ("retry", "0".into()), ("timeout_ms", "100".into())];
    // Nothing serves /late/ yet: each request is dead after one attempt.
    let cfg = Config::new().admin("port", port).service(queue("/q/", &work.0, &s));
    let core = Core::start(cfg);
    let mut api = core.client();
    for i in 0..3 {
        api.send_sync("/q/late/x", b"", format!("r{i}").as_bytes(), opts(5000)).unwrap();
    }
    wait_until("three dead letters", ms(10_000), || queue_view(&core, port, "/q/")["dead_letters"] == 3);
    let listed = core.admin_cmd(port, &["queues", "dead", "--queue", "/q/"]);
    assert!(listed.contains("3 dead letters in /q/") && listed.contains("/late/x"), "{listed}");
    assert!(listed.contains("1:NO_SERVICE"), "{listed}");
    // Now /late/ exists: a replay delivers them.
    let (mut late, got) = subscriber(&core, "/late/");
    let said = core.admin_cmd(port, &["queues", "replay"]);
    assert!(said.contains("replaying 3 dead letters"), "{said}");
    poll_until(&mut late, &got, 3, ms(10_000));
    wait_until("no dead letters", ms(5000), || queue_view(&core, port, "/q/")["dead_letters"] == 0);
    drop(late);
    api.send_sync("/q/late/x", b"", b"again", opts(5000)).unwrap();
    wait_until("one dead letter", ms(10_000), || queue_view(&core, port, "/q/")["dead_letters"] == 1);
    let said = core.admin_cmd(port, &["queues", "purge", "--queue", "/q/"]);
    assert!(said.contains("purged 1 dead letters"), "{said}");
    let v = queue_view(&core, port, "/q/");
    assert_eq!((v["dead_letters"].as_u64(), v["messages"].as_u64()), (Some(0), Some(0)), "{v}");
    let metrics = core.admin_cmd(port, &["queues", "--output", "json"]);
    assert!(metrics.contains("\"purged\": 1"), "{metrics}");
}

#[test]
fn a_full_queue_answers_queue_full_naming_the_limit() {
    let work = TempDir::new();
    let s = [
        ("mode", q("accepted")),
        ("max_messages", "5".into()),
        ("retry", "1000".into()),
        ("retry_delay_ms", "60000".into()),
    ];
    let core = Core::start(Config::new().service(queue("/q/", &work.0, &s)));
    let mut api = core.client();
    for i in 0..5 {
        api.send_sync("/q/nobody/x", b"", format!("{i}").as_bytes(), opts(5000)).unwrap();
    }
    let r = api.send_sync("/q/nobody/x", b"", b"one too many", opts(5000));
    assert_eq!(status(&r), Status::QueueFull);
    assert!(r.unwrap_err().to_string().contains("max_messages (5)"));
}

#[test]
fn bad_requests_get_a_clear_error() {
    let work = TempDir::new();
    let core = Core::start(Config::new().core("max_frame", 65_536).service(queue("/q/", &work.0, &[])));
    let mut api = core.client();
    let itself = api.send_sync("/q/q/x", b"", b"", opts(2000));
    assert_eq!(status(&itself), Status::InvalidArgument);
    assert!(itself.unwrap_err().to_string().contains("cannot deliver to itself"));
    let bad_reply = api.send_sync("/q/x/y", b"reply_to\0nope\0", b"", opts(2000));
    assert_eq!(status(&bad_reply), Status::InvalidArgument);
    let big = api.send_sync("/q/x/y", b"", &vec![0u8; 100_000], opts(2000));
    assert_ne!(status(&big), Status::Ok, "a request over max_frame is refused before the queue");
    let after = api.send_sync("/q/q/x", b"", b"", opts(2000));
    assert_eq!(status(&after), Status::InvalidArgument, "the queue still serves");
}

#[test]
fn a_destination_killed_under_load_gets_everything_within_the_deadline() {
    let work = TempDir::new();
    let record = work.0.join("got.txt");
    let s = [
        ("mode", q("accepted")),
        ("retry", "50".into()),
        ("retry_delay_ms", "50".into()),
        ("retry_backoff", q("exponential")),
        ("retry_max_delay_ms", "500".into()),
        ("expires_ms", "30000".into()),
        ("max_in_flight", "16".into()),
    ];
    // Each request takes 2 ms: the 2,000 take a few seconds, killed every 150 ms.
    let dest = recorder!("/dest/", record)
        .mode("sleep")
        .env("TS_SLEEP_MS", 2)
        .set("count_process", 2)
        .set("restart_delay", 50)
        .set("max_r", 1000);
    let core = Core::start(Config::new().service(dest).service(queue("/q/", &work.0.join("q"), &s)));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let killer = {
        let (stop, pid) = (stop.clone(), core.pid);
        std::thread::spawn(move || {
            let mut kills = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(ms(150));
                let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
                if let Some(child) = children.split_whitespace().next() {
                    let _ = std::process::Command::new("kill").args(["-9", child]).status();
                    kills += 1;
                }
            }
            kills
        })
    };
    let mut api = core.client();
    let n = 2000;
    let t = Instant::now();
    let mut pending = HashMap::new();
    let mut acked = 0;
    let mut next = 0;
    while acked < n {
        while pending.len() < 32 && next < n {
            pending.insert(api.send_async("/q/dest/x", b"", next.to_string().as_bytes(), opts(5000)), next);
            next += 1;
        }
        let (tid, r) = api.recv_async(None, ms(5000)).unwrap().expect("an acknowledgement");
        r.unwrap_or_else(|e| panic!("refused: {e}"));
        pending.remove(&tid);
        acked += 1;
    }
    wait_until("all 2,000 delivered", Duration::from_secs(30), || recorded(&record).len() == n);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let kills = killer.join().unwrap();
    eprintln!("2,000 delivered in {:?} with {kills} kills of the destination's processes", t.elapsed());
    assert!(kills >= 3, "the destination was killed {kills} times");
}

#[test]
fn a_resiliency_policy_applies_to_the_queues_deliveries() {
    // Of two instances behind the queue one fails every request; the
    // queue makes one attempt, the policy retries it on the other instance.
    let work = TempDir::new();
    let chaos = |settings: &str| Service::internal("/qd/", "chaos").set("settings", format!("{{ {settings} }}"));
    let admin = free_port();
    let cfg = Config::new()
        .admin("port", admin)
        .service(chaos("fail = 1.0"))
        .service(chaos("fail = 0.0"))
        .service(queue("/q/", &work.0, &[("retry", "0".into())]))
        .table(
            "[[policy]]\nname = \"behind-the-queue\"\ndestinations = [\"/qd/*\"]\n\
             [policy.retry]\nmax_retries = 2\ninterval_ms = 5\non = [\"SERVICE_ERROR\"]\n",
        );
    let core = Core::start(cfg);
    let mut api = core.client();
    wait_until("both instances subscribe", ms(10_000), || {
        api.send_sync("/qd/probe", b"", b"", opts(1000)).is_ok()
            && api.send_sync("/qd/probe", b"", b"", opts(1000)).is_ok()
    });
    for i in 0..50 {
        let r = api.send_sync("/q/qd/x", b"", format!("{i}").as_bytes(), opts(5000));
        assert_eq!(status(&r), Status::Ok, "delivery {i}");
    }
}

/// A request's trace context (PROTOCOL.md 5.1) is part of what the queue
/// stores: delivered from the log a killed core left, unchanged.
#[test]
fn a_stored_requests_trace_context_is_delivered_after_the_core_is_killed() {
    let work = TempDir::new();
    let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let state = "congo=t61rcWkgMzE";
    // Nobody serves /dest/ yet: the request stays in the log, tried again
    // every 100 ms.
    let s = [("mode", q("accepted")), ("retry", "1000".into()), ("retry_delay_ms", "100".into())];
    let mut core = Core::start(Config::new().service(queue("/q/", &work.0, &s)));
    let mut api = core.client();
    let info = cumulo::info::encode(&[("traceparent", parent), ("tracestate", state), ("mine", "yes")]);
    let r = api.send_sync("/q/dest/x", &info, b"traced", opts(5000)).unwrap();
    let id = field(&r, "queue-id");
    drop(api);
    core.signal(libc::SIGKILL);
    assert!(core.wait_exit(ms(10_000)).is_some(), "the core did not die of SIGKILL");

    let core = Core::start(Config::new().service(queue("/q/", &work.0, &s)));
    let (mut dest, got) = subscriber(&core, "/dest/");
    poll_until(&mut dest, &got, 1, ms(10_000));
    let (name, ri, body) = got.borrow()[0].clone();
    assert_eq!((name.as_str(), body.as_slice()), ("/dest/x", &b"traced"[..]));
    assert_eq!(ri["queue-id"], id, "the same request");
    assert_eq!((ri["traceparent"].as_str(), ri["tracestate"].as_str()), (parent, state));
    assert_eq!(ri["mine"], "yes");
}
