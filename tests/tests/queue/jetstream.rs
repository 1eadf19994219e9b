//! The queue on JetStream (`backend = "jetstream"`): real `nats-server -js`
//! processes (one, or a cluster of three with `replicas = 3`), cumulo
//! nodes of one cloud sharing the queue's stream, a destination that
//! records every request it gets; cumulo nodes and NATS servers killed
//! with SIGKILL under load.

use crate::common::*;
use crate::recorder;
use cumulo_e2e::*;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A node of cloud `cloud` on these NATS servers, with an admin port.
fn node(cloud: &str, servers: &[String], name: &str, id: u32) -> Config {
    cluster_node(cloud, servers, name, id, 1000)
}

/// A queue at `prefix` on JetStream with these settings.
fn js_queue(prefix: &str, settings: &[(&str, String)]) -> Service {
    let mut pairs = vec!["backend = \"jetstream\"".to_string()];
    pairs.extend(settings.iter().map(|(k, v)| format!("{k} = {v}")));
    Service::internal(prefix, "queue").set("settings", format!("{{ {} }}", pairs.join(", ")))
}

/// The admin port a config was given.
fn admin_port(cfg: &Config) -> u16 {
    let text = cfg.render("x");
    let at = text.find("[admin]").unwrap();
    text[at..].lines().find_map(|l| l.strip_prefix("port = ")).unwrap().trim().parse().unwrap()
}

/// Waits until the queue at `prefix` has set up its stream (it reports
/// itself once subscribed), and returns its view.
fn wait_queue(core: &Core, port: u16, prefix: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = core.admin_cmd(port, &["queues", "--output", "json"]);
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) {
            if let Some(q) = v["queues"].as_array().and_then(|l| l.iter().find(|q| q["prefix"] == prefix)) {
                return q.clone();
            }
        }
        assert!(Instant::now() < deadline, "queue {prefix} not up within 30 s; log:\n{}", core.log());
        std::thread::sleep(ms(100));
    }
}

fn kill9(pid: u32) {
    let st = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(st.success(), "kill -9 {pid}");
}

#[test]
fn accepted_mode_stores_delivers_and_deduplicates_on_jetstream() {
    let nats = NatsServer::start_jetstream(None);
    let work = TempDir::new();
    let record = work.0.join("got.txt");
    let cfg = node("js1", &[nats.url()], "a", 1)
        .service(recorder!("/dest/", record))
        .service(js_queue("/q/", &[("mode", q("accepted"))]));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    let view = wait_queue(&core, port, "/q/");
    assert_eq!(view["backend"], "jetstream", "{view}");
    assert_eq!(view["stream"], "CUMULO_js1_q", "{view}");
    let mut api = core.client();
    let mut ids = Vec::new();
    for i in 0..20 {
        let r = api.send_sync("/q/dest/x", b"k\0v\0", format!("a{i}").as_bytes(), opts(5000)).unwrap();
        let id = field(&r, "queue-id");
        assert_eq!(r.body, id.as_bytes(), "the body is the id");
        ids.push(id.parse::<u64>().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids are the stream's sequence: {ids:?}");
    let first = api.send_sync("/q/dest/x", b"idempotency-key\0order-7\0", b"once", opts(5000)).unwrap();
    let again = api.send_sync("/q/dest/x", b"idempotency-key\0order-7\0", b"once", opts(5000)).unwrap();
    assert_eq!(field(&again, "queue-id"), field(&first, "queue-id"));
    assert_eq!(field(&again, "queue-duplicate"), "1");
    wait_until("all delivered", ms(15_000), || recorded(&record).len() == 21);
    std::thread::sleep(ms(500));
    let seen = recorded(&record);
    assert_eq!(seen.get("once"), Some(&1), "the duplicate is not delivered again");
    assert!((0..20).all(|i| seen.get(&format!("a{i}")) == Some(&1)), "{seen:?}");
    wait_until("the report's counters", ms(5000), || {
        let v = queue_view(&core, port, "/q/");
        v["delivered"] == 21 && v["depth"] == 0 && v["duplicates"] == 1
    });
}

#[test]
fn failed_attempts_are_retried_then_dead_lettered_on_jetstream() {
    let nats = NatsServer::start_jetstream(None);
    let s = [
        ("mode", q("accepted")),
        ("retry", "2".into()),
        ("retry_delay_ms", "50".into()),
        ("timeout_ms", "200".into()),
        ("dead_letter", q("/dead/letters")),
    ];
    let cfg = node("js2", &[nats.url()], "a", 1).service(ts!("/hang/").mode("hang")).service(js_queue("/q/", &s));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    wait_queue(&core, port, "/q/");
    let (mut dead, got) = subscriber(&core, "/dead/");
    let mut api = core.client();
    let r = api.send_sync("/q/hang/x", b"mine\0yes\0", b"doomed", opts(5000)).unwrap();
    poll_until(&mut dead, &got, 1, ms(15_000));
    let (name, ri, body) = got.borrow()[0].clone();
    assert_eq!((name.as_str(), body.as_slice()), ("/dead/letters", &b"doomed"[..]));
    assert_eq!(ri["queue-id"], field(&r, "queue-id"));
    assert_eq!(ri["queue-destination"], "/hang/x");
    assert_eq!(ri["queue-attempts"], "3", "retry = 2: three attempts");
    assert_eq!(ri["mine"], "yes");
    let history: Vec<&str> = ri["queue-history"].split(',').collect();
    assert_eq!(history.len(), 3, "{history:?}");
    for (i, h) in history.iter().enumerate() {
        assert!(h.starts_with(&format!("{}:TIMEOUT@", i + 1)), "{history:?}");
    }
    wait_until("the dead letter counted", ms(5000), || queue_view(&core, port, "/q/")["dead_lettered"] == 1);
}

#[test]
fn destination_mode_answers_with_the_destinations_answer_on_jetstream() {
    let nats = NatsServer::start_jetstream(None);
    let cfg = node("js3", &[nats.url()], "a", 1).service(ts!("/dest/")).service(js_queue("/q/", &[]));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    wait_queue(&core, port, "/q/");
    let mut api = core.client();
    let r = api.send_sync("/q/dest/hello", b"k\0v\0", b"body", opts(5000)).unwrap();
    assert_eq!(r.body, b"body");
    assert_eq!(field(&r, "name"), "/dest/hello");
    assert!(field(&r, "queue-id").parse::<u64>().is_ok_and(|id| id > 0));
}

/// Two nodes share the queue: a request taken on node a may be delivered
/// by node b; its sender, waiting on a, gets the answer either way.
#[test]
fn destination_mode_answers_reach_the_sender_whichever_node_delivers() {
    let nats = NatsServer::start_jetstream(None);
    let urls = [nats.url()];
    let cfg_b = node("js4", &urls, "b", 2).service(js_queue("/q/", &[]));
    let cfg_a = node("js4", &urls, "a", 1).service(ts!("/dest/")).service(js_queue("/q/", &[]));
    let (port_a, port_b) = (admin_port(&cfg_a), admin_port(&cfg_b));
    let b = Core::start(cfg_b);
    let a = Core::start(cfg_a);
    wait_queue(&a, port_a, "/q/");
    wait_queue(&b, port_b, "/q/");
    let mut api = a.client();
    // /dest/ is on a: b's queue reaches it once b knows a's patterns.
    wait_until("b sees /dest/", ms(10_000), || b.client().send_sync("/dest/probe", b"", b"", opts(1000)).is_ok());
    let tids: Vec<_> =
        (0..40).map(|i| (api.send_async("/q/dest/x", b"", format!("n{i}").as_bytes(), opts(10_000)), i)).collect();
    let mut got = HashMap::new();
    for _ in 0..tids.len() {
        let (tid, r) = api.recv_async(None, ms(10_000)).unwrap().expect("an answer within 10 s");
        let r = r.unwrap_or_else(|e| panic!("{e}; log of a:\n{}\nlog of b:\n{}", a.log(), b.log()));
        got.insert(tid, r.body);
    }
    for (tid, i) in tids {
        assert_eq!(got[&tid], format!("n{i}").into_bytes());
    }
    let by_b = wait_queue(&b, port_b, "/q/")["delivered"].as_u64().unwrap_or(0);
    eprintln!("node b delivered {by_b} of 40, node a the rest");
}

/// Sends ids from `next` on, `window` at a time, until `total` are
/// acknowledged; `event` runs once when `at` are acknowledged. Refusals
/// (SERVICE_ERROR while NATS fails over) are counted, not acknowledged.
fn send_load(api: &mut Api, total: usize, window: usize, at: usize, mut event: impl FnMut()) -> (Vec<u64>, u64, u64) {
    let (mut next, mut acked, mut refused, mut fired) = (1u64, Vec::new(), 0u64, false);
    let mut pending = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if !fired && acked.len() >= at {
            fired = true;
            event();
        }
        while pending.len() < window && acked.len() + pending.len() < total {
            let tid = api.send_async("/q/rec/x", b"", next.to_string().as_bytes(), opts(10_000));
            pending.insert(tid, next);
            next += 1;
        }
        if pending.is_empty() {
            return (acked, next - 1, refused);
        }
        assert!(Instant::now() < deadline, "the load did not finish in 180 s");
        match api.recv_async(None, ms(15_000)) {
            Ok(Some((tid, Ok(_)))) => acked.extend(pending.remove(&tid)),
            Ok(Some((tid, Err(e)))) => {
                pending.remove(&tid);
                refused += 1;
                if refused % 50 == 1 {
                    eprintln!("refused ({refused} so far): {e}");
                }
            }
            other => panic!("no answer: {other:?}"),
        }
    }
}

/// Every acknowledged id recorded; returns the duplicates.
fn check_delivered(record: &std::path::Path, acked: &[u64], limit: Duration) -> u32 {
    let wanted: Vec<String> = acked.iter().map(u64::to_string).collect();
    let deadline = Instant::now() + limit;
    loop {
        let seen = recorded(record);
        let lost: Vec<&String> = wanted.iter().filter(|id| !seen.contains_key(*id)).collect();
        if lost.is_empty() {
            return seen.values().map(|n| n - 1).sum();
        }
        assert!(
            Instant::now() < deadline,
            "{} acknowledged but never delivered: {:?}",
            lost.len(),
            &lost[..lost.len().min(20)]
        );
        std::thread::sleep(ms(100));
    }
}

const TOTAL: usize = 3_000;
const WINDOW: usize = 32;

#[test]
fn kill_of_a_cumulo_node_under_load_loses_no_acknowledged_request() {
    let nats = NatsServer::start_jetstream(None);
    let urls = [nats.url()];
    let work = TempDir::new();
    let record = work.0.join("delivered.txt");
    let s = [
        ("mode", q("accepted")),
        ("max_in_flight", "32".into()),
        ("retry", "20".into()),
        ("timeout_ms", "2000".into()),
    ];
    let cfg_a = node("js5", &urls, "a", 1)
        .service(recorder!("/rec/", record).set("count_process", 2))
        .service(js_queue("/q/", &s));
    let cfg_b = node("js5", &urls, "b", 2).service(js_queue("/q/", &s));
    let (port_a, port_b) = (admin_port(&cfg_a), admin_port(&cfg_b));
    let a = Core::start(cfg_a);
    let mut b = Core::start(cfg_b);
    wait_queue(&a, port_a, "/q/");
    wait_queue(&b, port_b, "/q/");
    wait_until("b sees /rec/", ms(10_000), || b.client().send_sync("/rec/probe", b"", b"probe", opts(1000)).is_ok());
    let started = Instant::now();
    let mut api = a.client();
    let b_pid = b.pid;
    let mut b_view = serde_json::Value::Null;
    let (acked, sent, refused) = send_load(&mut api, TOTAL, WINDOW, 1000, || {
        b_view = queue_view(&b, port_b, "/q/");
        kill9(b_pid)
    });
    eprintln!(
        "node b when killed: {} delivered, {} deliveries in flight",
        b_view["delivered"], b_view["in_flight_here"]
    );
    assert!(b.wait_exit(ms(10_000)).is_some(), "node b did not die");
    let duplicates = check_delivered(&record, &acked, Duration::from_secs(60));
    eprintln!(
        "{} acknowledged ({sent} sent, {refused} refused) with node b killed after 1000, in {:?}: 0 lost, {duplicates} \
         delivered twice or more",
        acked.len(),
        started.elapsed()
    );
    assert_eq!(acked.len(), TOTAL);
}

#[test]
fn kill_of_one_nats_server_of_three_under_load_loses_no_acknowledged_request() {
    let mut nats = NatsCluster::start_jetstream(3);
    let work = TempDir::new();
    let record = work.0.join("delivered.txt");
    let s = [
        ("mode", q("accepted")),
        ("replicas", "3".into()),
        ("max_in_flight", "32".into()),
        ("retry", "20".into()),
        ("timeout_ms", "2000".into()),
    ];
    let cfg = node("js6", &nats.urls(), "a", 1)
        .service(recorder!("/rec/", record).set("count_process", 2))
        .service(js_queue("/q/", &s));
    let port = admin_port(&cfg);
    let a = Core::start(cfg);
    let view = wait_queue(&a, port, "/q/");
    assert_eq!(view["replicas"], 3, "{view}");
    let started = Instant::now();
    let mut api = a.client();
    // The server that leads the stream is the one killed.
    wait_until("the stream's leader known", ms(10_000), || queue_view(&a, port, "/q/")["leader"].is_string());
    let leader = queue_view(&a, port, "/q/")["leader"].as_str().unwrap().to_string();
    let at = nats.servers.iter().position(|s| leader == format!("s{}", s.port)).expect("the leader is one of ours");
    let victim = nats.servers[at].pid().unwrap();
    let (acked, sent, refused) = send_load(&mut api, TOTAL, WINDOW, 1000, || kill9(victim));
    nats.servers[at].kill();
    wait_until("a new leader", ms(30_000), || {
        let l = &queue_view(&a, port, "/q/")["leader"];
        l.is_string() && *l != leader.as_str()
    });
    let duplicates = check_delivered(&record, &acked, Duration::from_secs(90));
    eprintln!(
        "{} acknowledged ({sent} sent, {refused} refused while NATS failed over) with the stream's leader \
         ({leader}), one NATS server of three, killed after 1000, in {:?}: 0 lost, {duplicates} delivered twice or more",
        acked.len(),
        started.elapsed()
    );
}

#[test]
fn a_jetstream_queue_without_cluster_is_refused_by_check() {
    let work = TempDir::new();
    let config = work.0.join("c.toml");
    std::fs::write(&config, Config::new().service(js_queue("/q/", &[])).render("/tmp/unused.sock")).unwrap();
    let out = cumulo_cmd().arg("check").arg("--config").arg(&config).output().expect("run cumulo check");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    for needle in ["cluster.servers", "service[0] (/q/)", "backend = \"jetstream\""] {
        assert!(text.contains(needle), "'{needle}' not in: {text}");
    }
    // File-only settings are refused on jetstream.
    let cfg = node("x", &["nats://127.0.0.1:4222".into()], "a", 1).service(js_queue("/q/", &[("dir", q("/tmp/q"))]));
    std::fs::write(&config, cfg.render("/tmp/unused.sock")).unwrap();
    let out = cumulo_cmd().arg("check").arg("--config").arg(&config).output().expect("run cumulo check");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("settings.dir is a setting of the file backend only"), "{text}");
}

#[test]
fn a_request_over_the_nats_max_payload_is_refused_at_once() {
    let nats = NatsServer::start_jetstream(Some(64 * 1024));
    let cfg = node("js7", &[nats.url()], "a", 1).service(ts!("/dest/")).service(js_queue("/q/", &[]));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    wait_queue(&core, port, "/q/");
    let mut api = core.client();
    let t = Instant::now();
    let e = api.send_sync("/q/dest/big", b"", &vec![7u8; 100 * 1024], opts(10_000));
    assert_eq!(status(&e), Status::TooLarge, "{e:?}");
    assert!(t.elapsed() < ms(2000), "refused after {:?}", t.elapsed());
    assert!(format!("{:?}", e.err().unwrap()).contains("max_payload"));
    // A small one still goes through.
    let r = api.send_sync("/q/dest/small", b"", b"ok", opts(5000)).unwrap();
    assert_eq!(r.body, b"ok");
}

#[test]
fn dead_letters_are_listed_replayed_and_purged_on_jetstream() {
    let nats = NatsServer::start_jetstream(None);
    let s = [("mode", q("accepted")), ("retry", "0".into()), ("timeout_ms", "100".into())];
    // Nothing serves /late/ yet: each request is dead after one attempt.
    let cfg = node("js8", &[nats.url()], "a", 1).service(js_queue("/q/", &s));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    let view = wait_queue(&core, port, "/q/");
    assert!(view["sync"].as_str().is_some_and(|s| s.starts_with("jetstream")), "{view}");
    let mut api = core.client();
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = api.send_sync("/q/late/x", b"", format!("r{i}").as_bytes(), opts(5000)).unwrap();
        ids.push(field(&r, "queue-id"));
    }
    wait_until("three dead letters", ms(10_000), || queue_view(&core, port, "/q/")["dead_letters"] == 3);
    wait_until("three listed", ms(5000), || {
        let listed = core.admin_cmd(port, &["queues", "dead", "--queue", "/q/"]);
        listed.contains("3 dead letters in /q/") && listed.contains("/late/x") && listed.contains("1:NO_SERVICE")
    });
    // Now /late/ exists: a replay delivers them, with their first ids.
    let (mut late, got) = subscriber(&core, "/late/");
    let said = core.admin_cmd(port, &["queues", "replay"]);
    assert!(said.contains("3 dead letters"), "{said}");
    poll_until(&mut late, &got, 3, ms(10_000));
    let mut again: Vec<String> = got.borrow().iter().map(|(_, ri, _)| ri["queue-id"].clone()).collect();
    again.sort();
    ids.sort();
    assert_eq!(again, ids, "a replayed request keeps its id");
    wait_until("no dead letters", ms(5000), || queue_view(&core, port, "/q/")["dead_letters"] == 0);
    drop(late);
    api.send_sync("/q/late/x", b"", b"again", opts(5000)).unwrap();
    wait_until("one dead letter", ms(10_000), || queue_view(&core, port, "/q/")["dead_letters"] == 1);
    let said = core.admin_cmd(port, &["queues", "purge", "--queue", "/q/"]);
    assert!(said.contains("purged 1 dead letters"), "{said}");
    wait_until("purged", ms(5000), || {
        let v = queue_view(&core, port, "/q/");
        v["dead_letters"] == 0 && v["messages"] == 0 && v["purged"] == 1
    });
}

#[test]
fn a_full_stream_answers_queue_full_naming_the_limit() {
    let nats = NatsServer::start_jetstream(None);
    // The destination never answers within the minute: what is taken stays.
    let s = [("mode", q("accepted")), ("max_messages", "3".into()), ("timeout_ms", "60000".into())];
    let cfg = node("js9", &[nats.url()], "a", 1).service(ts!("/hang/").mode("hang")).service(js_queue("/q/", &s));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    wait_queue(&core, port, "/q/");
    let mut api = core.client();
    for i in 0..3 {
        api.send_sync("/q/hang/x", b"", format!("r{i}").as_bytes(), opts(5000)).unwrap();
    }
    let t = Instant::now();
    let e = api.send_sync("/q/hang/x", b"", b"one too many", opts(5000));
    assert_eq!(status(&e), Status::QueueFull, "{e:?}");
    assert!(format!("{:?}", e.err().unwrap()).contains("max_messages (3)"));
    assert!(t.elapsed() < ms(2000), "refused after {:?}", t.elapsed());
    wait_until("counted", ms(5000), || queue_view(&core, port, "/q/")["refused_full"] == 1);
}

#[test]
fn with_nats_down_a_sender_gets_an_error_within_its_timeout() {
    let mut nats = NatsServer::start_jetstream(None);
    let cfg =
        node("js10", &[nats.url()], "a", 1).service(ts!("/dest/")).service(js_queue("/q/", &[("mode", q("accepted"))]));
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    wait_queue(&core, port, "/q/");
    let mut api = core.client();
    api.send_sync("/q/dest/x", b"", b"before", opts(5000)).unwrap();
    nats.kill();
    let t = Instant::now();
    let e = api.send_sync("/q/dest/x", b"", b"while down", opts(2000));
    let took = t.elapsed();
    assert_eq!(status(&e), Status::ServiceError, "{e:?}");
    assert!(format!("{:?}", e.err().unwrap()).contains("may or may not be stored"));
    assert!(took < ms(2000), "answered after {took:?}, past the request's timeout");
    // Back up (same port, same store): the queue takes requests again.
    nats.restart();
    wait_until("the queue takes requests again", ms(20_000), || {
        api.send_sync("/q/dest/x", b"", b"after", opts(2000)).is_ok()
    });
}
