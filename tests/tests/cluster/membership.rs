//! Who is in the cloud: joins, subscriptions made at run time, cloud names,
//! identity conflicts, and the nodes view of the admin API and CLI.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;
use std::time::Instant;

/// The documented bound for a subscription made at run time to be usable
/// from another node: the 50 ms snapshot debounce plus one NATS hop; the
/// test allows a busy machine ten times that.
const RUNTIME_SUBSCRIPTION_BOUND_MS: u64 = 500;

#[test]
fn a_subscription_made_at_run_time_is_reachable_from_another_node_within_the_bound() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let c = Core::start(node(&urls, "c", 3).service(tagged!("/c_probe/", "c")));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/c_probe/x", ms(10_000));

    // an instance on c subscribes /late/x now
    let (socket, stop) = (c.socket_str(), c.dir.0.join("stop"));
    let (tx, rx) = std::sync::mpsc::channel();
    let stop2 = stop.clone();
    let served = std::thread::spawn(move || {
        let mut srv = Api::connect(Options::unmanaged(socket, "/late/")).unwrap();
        srv.subscribe("x", |_, _| Ok(cumulo::Answer::body("from c"))).unwrap();
        tx.send(Instant::now()).unwrap();
        while !stop2.exists() {
            srv.poll(Some(ms(20))).unwrap();
        }
    });
    let subscribed = rx.recv().unwrap();
    let reached = loop {
        match api.send_sync("/late/x", b"", b"", opts(2000)) {
            Ok(r) => {
                assert_eq!(r.body, b"from c");
                break subscribed.elapsed();
            }
            Err(e) => {
                assert_eq!(e.status(), Some(Status::NoService), "{e}");
                assert!(subscribed.elapsed() < ms(5000), "never reachable");
                std::thread::sleep(ms(5));
            }
        }
    };
    assert!(
        reached < ms(RUNTIME_SUBSCRIPTION_BOUND_MS),
        "a run-time subscription took {reached:?} to reach another node"
    );
    std::fs::write(&stop, "").unwrap();
    served.join().unwrap();
}

#[test]
fn an_unsubscribed_name_stops_being_routed_to_its_node() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let c = Core::start(node(&urls, "c", 3));
    let a = Core::start(node(&urls, "a", 1));
    let stop = c.dir.0.join("stop");
    let (socket, stop2) = (c.socket_str(), stop.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let server = std::thread::spawn(move || {
        let mut srv = Api::connect(Options::unmanaged(socket, "/gone/")).unwrap();
        srv.subscribe("x", |_, _| Ok(cumulo::Answer::body("c"))).unwrap();
        tx.send(()).unwrap();
        while !stop2.exists() {
            srv.poll(Some(ms(20))).unwrap();
        }
        srv.unsubscribe("x").unwrap();
        // keep the connection: only the subscription ends
        std::thread::sleep(ms(3000));
    });
    rx.recv().unwrap();
    let mut api = a.client();
    wait_reachable(&mut api, "/gone/x", ms(10_000));
    std::fs::write(&stop, "").unwrap();
    let t0 = Instant::now();
    loop {
        match api.send_sync("/gone/x", b"", b"", opts(1000)) {
            Err(e) if e.status() == Some(Status::NoService) => break,
            // sent before the unsubscription reached a: answered, or refused by c
            Ok(_) | Err(_) => {}
        }
        assert!(t0.elapsed() < ms(RUNTIME_SUBSCRIPTION_BOUND_MS + 1000), "still routed to c");
        std::thread::sleep(ms(5));
    }
    server.join().unwrap();
}

#[test]
fn two_clouds_on_one_nats_do_not_see_each_other() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    // the same node names and node_ids in both clouds: no conflict either
    let _one_b = Core::start(node_in("one", &urls, "b", 2).service(tagged!("/one/", "one-b")));
    let _two_b = Core::start(node_in("two", &urls, "b", 2).service(tagged!("/two/", "two-b")));
    let one_a = Core::start(node_in("one", &urls, "a", 1));
    let mut api = one_a.client();
    let r = wait_reachable(&mut api, "/one/x", ms(10_000));
    assert_eq!(field(&r, "tag"), "one-b");
    // several heartbeats later, still nothing of cloud two
    std::thread::sleep(ms(5 * HEARTBEAT_MS as u64));
    assert_eq!(status(&api.send_sync("/two/x", b"", b"", opts(1000))), Status::NoService);
    assert!(one_a.lines_with(&["node_id"]).iter().all(|l| !l.contains("ERROR")), "{}", one_a.log());
    let joined = one_a.lines_with(&["joined the cloud"]);
    assert_eq!(joined.len(), 1, "only b of cloud one joined: {joined:?}");
}

#[test]
fn a_node_with_this_nodes_node_id_is_refused_with_an_error() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let b = Core::start(node(&urls, "b", 7).service(tagged!("/dup/", "b")));
    let a = Core::start(node(&urls, "a", 7));
    a.wait_lines(&["ERROR", "node 'b' has this node's core.node_id 7"], 1, ms(5000));
    b.wait_lines(&["ERROR", "node 'a' has this node's core.node_id 7"], 1, ms(5000));
    let mut api = a.client();
    assert_eq!(status(&api.send_sync("/dup/x", b"", b"", opts(1000))), Status::NoService);
    assert!(a.lines_with(&["joined the cloud"]).is_empty());
}

#[test]
fn nodes_are_listed_by_the_admin_api_and_the_cli() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let b_cfg = node(&urls, "b", 2).service(tagged!("/b/", "b").set("count_process", 2));
    let _b = Core::start(b_cfg);
    let a_cfg = node(&urls, "a", 1);
    let port = admin_port(&a_cfg);
    let a = Core::start(a_cfg);
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));
    let json: serde_json::Value = serde_json::from_str(&a.admin_cmd(port, &["nodes", "-o", "json"])).unwrap();
    let nodes = json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{json}");
    assert_eq!((nodes[0]["name"].as_str(), nodes[0]["local"].as_bool()), (Some("a"), Some(true)));
    let b = &nodes[1];
    assert_eq!((b["name"].as_str(), b["id"].as_u64(), b["state"].as_str()), (Some("b"), Some(2), Some("up")));
    assert_eq!(b["subscriptions"].as_u64(), Some(2), "two instances of /b/*: {b}");
    assert!(b["last_heartbeat_ms_ago"].as_u64().unwrap() < 2 * PURGE_MS as u64);
    assert_eq!(json["cluster"]["name"], "test");
    assert_eq!(json["cluster"]["connected"], true);
    let text = a.admin_cmd(port, &["nodes"]);
    assert!(text.contains("cloud 'test'") && text.contains("connected"), "{text}");
    let line = text.lines().find(|l| l.starts_with("b ")).unwrap_or_else(|| panic!("no line for b: {text}"));
    assert!(line.contains(" up ") && line.contains("ms ago"), "{line}");
}

#[test]
fn a_node_without_a_cluster_section_is_a_single_node() {
    let cfg = Config::new().admin("port", free_port());
    let port = admin_port(&cfg);
    let core = Core::start(cfg);
    let json: serde_json::Value = serde_json::from_str(&core.admin_cmd(port, &["nodes", "-o", "json"])).unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), 1);
    assert!(json["cluster"].is_null());
    assert!(core.admin_cmd(port, &["nodes"]).contains("single node"));
    assert!(core.lines_with(&["cluster"]).is_empty(), "no cluster task: {}", core.log());
}

#[test]
fn a_stopped_node_leaves_at_once() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let mut b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b")));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));
    b.signal(libc::SIGTERM);
    let t0 = Instant::now();
    b.wait_exit(ms(10_000)).expect("b stops");
    a.wait_lines(&["node b left the cloud (stopped)"], 1, ms(PURGE_MS as u64 / 2));
    assert!(t0.elapsed() < ms(PURGE_MS as u64 * 3), "left by its goodbye, before any purge");
    assert!(a.lines_with(&["purged"]).is_empty(), "{}", a.log());
    assert_eq!(status(&api.send_sync("/b/x", b"", b"", opts(1000))), Status::NoService);
}

#[test]
fn per_node_metrics_count_requests_errors_and_latency() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b")));
    let a_cfg = node(&urls, "a", 1);
    let port = admin_port(&a_cfg);
    let a = Core::start(a_cfg);
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));
    let before = sample(&admin_get(port, "/metrics"), "cumulo_node_requests_sent_total{node=\"b\"}");
    for _ in 0..10 {
        api.send_sync("/b/x", b"", b"", opts(5000)).unwrap();
    }
    assert_eq!(status(&api.send_sync("/b/x", b"", b"sleep:500", opts(100))), Status::Timeout);
    let m = admin_get(port, "/metrics");
    assert_eq!(sample(&m, "cumulo_node_requests_sent_total{node=\"b\"}"), before + 11, "{m}");
    // a's timer ends it (an error), or b's TIMEOUT answer arrives first (a response)
    let timeouts = sample_or_0(&m, "cumulo_node_request_errors_total{node=\"b\",status=\"TIMEOUT\"}")
        + sample_or_0(&m, "cumulo_node_responses_total{node=\"b\",status=\"TIMEOUT\"}");
    assert_eq!(timeouts, 1, "{m}");
    assert!(sample(&m, "cumulo_node_responses_total{node=\"b\",status=\"OK\"}") >= 10, "{m}");
    assert!(sample(&m, "cumulo_node_request_duration_seconds_count{node=\"b\"}") >= 10, "{m}");
    assert_eq!(sample(&m, "cumulo_cluster_nodes"), 1);
    assert_eq!(sample(&m, "cumulo_cluster_connected"), 1);
}

/// The value of one sample line (`name{labels} value`).
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
        .trim()
        .parse::<f64>()
        .unwrap() as u64
}

fn sample_or_0(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}
