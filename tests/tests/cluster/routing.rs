//! Requests across nodes: send_sync, send_async, request_info, binary
//! bodies, priorities, and where dest_refresh sends them.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;
use std::collections::HashMap;

#[test]
fn send_sync_and_async_reach_a_service_on_another_node() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b").set("count_thread", 2)));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));

    // sync: request_info and a binary body (every byte value) round-trip
    let info_in = cumulo::info::encode(&[("k", "v"), ("trace", "00-ab-cd-01")]);
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 256) as u8).collect();
    let r = api
        .send_sync("/b/hello", &info_in, &body, SendOptions { timeout: 5000, priority: -3, ..Default::default() })
        .unwrap();
    assert!(r.body == body, "the body came back altered ({} bytes)", r.body.len());
    assert_eq!(field(&r, "tag"), "b", "answered on node b");
    assert_eq!(field(&r, "name"), "/b/hello");
    assert_eq!(field(&r, "pattern"), "/b/*");
    assert_eq!(field(&r, "priority"), "-3", "the priority crosses nodes");
    assert_eq!(field(&r, "sync"), "1");
    let left: u32 = field(&r, "timeout").parse().unwrap();
    assert!(left > 0 && left <= 5000, "the remote service sees the time left: {left}");

    // async: several in flight, collected by recv_async
    let ids: Vec<_> =
        (0..20).map(|i| api.send_async("/b/async", b"", format!("n{i}").as_bytes(), opts(5000))).collect();
    let mut got = HashMap::new();
    for _ in 0..ids.len() {
        let (tid, res) = api.recv_async(None, ms(5000)).unwrap().expect("an answer within 5 s");
        let r = res.unwrap();
        assert_eq!(field(&r, "tag"), "b");
        assert_eq!(field(&r, "sync"), "0");
        got.insert(tid, r.body);
    }
    for (i, tid) in ids.iter().enumerate() {
        assert_eq!(got[tid], format!("n{i}").into_bytes());
    }
    // a name no node serves fails fast
    let e = api.send_sync("/nobody/x", b"", b"", opts(5000));
    assert_eq!(status(&e), Status::NoService);
}

/// A request's trace context (PROTOCOL.md 5.1) crosses nodes unchanged:
/// the echo service on node b answers with the request_info it got.
#[test]
fn a_requests_trace_context_reaches_another_node_unchanged() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(Service::internal("/echo/", "echo")));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/echo/x", ms(10_000));
    let sent = cumulo::info::encode(&[
        ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("tracestate", "congo=t61rcWkgMzE"),
    ]);
    for i in 0..3 {
        let r = api.send_sync("/echo/x", &sent, b"", opts(5000)).unwrap();
        assert_eq!(r.info, sent, "send_sync {i}: what node b's echo got");
    }
    let tid = api.send_async("/echo/y", &sent, b"", opts(5000));
    let (_, answer) = api.recv_async(Some(tid), ms(5000)).unwrap().expect("an answer within 5 s");
    assert_eq!(answer.unwrap().info, sent, "send_async");
}

/// Counts, for 40 requests from node a to `/s/x` (one instance on a, one
/// on b), which node answered, under each node-aware dest_refresh.
#[test]
fn dest_refresh_policies_choose_the_node() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/s/", "b")).service(tagged!("/only_b/", "b")));
    let cases = [
        ("immediate_closest", 40, 0),
        ("lazy_closest", 40, 0),
        ("immediate_furthest", 0, 40),
        ("lazy_furthest", 0, 40),
        ("immediate_local", 40, 0),
        ("lazy_local", 40, 0),
        ("immediate_remote", 0, 40),
        ("lazy_remote", 0, 40),
    ];
    for (i, (policy, want_a, want_b)) in cases.into_iter().enumerate() {
        let name = format!("a{i}");
        let a = Core::start(
            node(&urls, &name, 10 + i as u32).unmanaged("dest_refresh", q(policy)).service(tagged!("/s/", "a")),
        );
        let mut api = a.client();
        // b's patterns are known once a name only b serves answers
        if policy.ends_with("_local") {
            wait_joined(&a, "b");
        } else {
            wait_reachable(&mut api, "/only_b/x", ms(10_000));
        }
        let counts = count_tags(&mut api, "/s/x", 40);
        assert_eq!(
            (counts.get("a").copied().unwrap_or(0), counts.get("b").copied().unwrap_or(0)),
            (want_a, want_b),
            "{policy}: {counts:?}"
        );
        if policy.ends_with("_local") {
            let e = api.send_sync("/only_b/x", b"", b"", opts(2000));
            assert_eq!(status(&e), Status::NoService, "{policy} never leaves the node");
        }
        if policy.ends_with("_furthest") || policy.ends_with("_closest") {
            // falls back to the other side when one side has none
            let r = api.send_sync("/only_b/x", b"", b"", opts(2000)).unwrap();
            assert_eq!(field(&r, "tag"), "b");
        }
    }
    // random and the others spread over both nodes
    for (i, policy) in ["immediate_random", "lazy_random", "round_robin", "least_busy"].into_iter().enumerate() {
        let a = Core::start(
            node(&urls, &format!("r{i}"), 30 + i as u32)
                .unmanaged("dest_refresh", q(policy))
                .service(tagged!("/s/", "a")),
        );
        let mut api = a.client();
        wait_reachable(&mut api, "/only_b/x", ms(10_000));
        let counts = count_tags(&mut api, "/s/x", 40);
        assert!(
            counts.get("a").copied().unwrap_or(0) > 0 && counts.get("b").copied().unwrap_or(0) > 0,
            "{policy}: {counts:?}"
        );
        assert_eq!(counts.values().sum::<u32>(), 40);
    }
}

fn count_tags(api: &mut Api, name: &str, n: u32) -> HashMap<String, u32> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        let r = api.send_sync(name, b"", b"", opts(5000)).unwrap();
        *counts.entry(field(&r, "tag")).or_default() += 1;
    }
    counts
}

#[test]
fn forward_across_nodes_keeps_the_sender_and_the_time_left() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    // a's client → /front/ on b (forwards after 200 ms) → /back/ on c
    let _c = Core::start(node(&urls, "c", 3).service(tagged!("/back/", "c")));
    let _b = Core::start(
        node(&urls, "b", 2)
            .service(tagged!("/front/", "b").mode("forward").env("TS_FORWARD_TO", "/back/x").env("TS_SLEEP_MS", 200)),
    );
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/back/x", ms(10_000));
    let end = std::time::Instant::now() + ms(10_000);
    let r = loop {
        // b may not know c's patterns yet: its forward then ends in NO_SERVICE
        match api.send_sync("/front/a", b"", b"through", opts(3000)) {
            Ok(r) => break r,
            Err(e) if std::time::Instant::now() < end => {
                assert_eq!(e.status(), Some(Status::NoService), "{e}");
                std::thread::sleep(ms(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(field(&r, "tag"), "c", "answered by the service the request was forwarded to");
    assert_eq!(field(&r, "name"), "/back/x");
    assert_eq!(r.body, b"through");
    assert_eq!(field(&r, "sync"), "1");
    let left: u32 = field(&r, "timeout").parse().unwrap();
    assert!(left <= 2800, "c sees only the time left after b's 200 ms: {left}");
}

#[test]
fn the_http_gateway_on_one_node_serves_a_service_on_another() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let port = free_port();
    let _c = Core::start(node(&urls, "c", 3).service(tagged!("/calc/", "c")));
    let a = Core::start(
        node(&urls, "a", 1).service(Service::internal("/web/", "http").set("settings", format!("{{ port = {port} }}"))),
    );
    let mut api = a.client();
    wait_reachable(&mut api, "/calc/add/post", ms(10_000));
    let (code, body) = http_post(port, "/calc/add", b"1+2");
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(body, b"1+2", "the service on c echoed the body");
}

fn http_post(port: u16, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(ms(5000))).unwrap();
    write!(s, "POST {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-length: {}\r\n\r\n", body.len())
        .unwrap();
    s.write_all(body).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    let code = String::from_utf8_lossy(&buf[9..12]).parse().unwrap();
    (code, buf[end + 4..].to_vec())
}

#[test]
fn a_request_or_answer_over_the_nats_max_payload_is_too_large() {
    let nats = NatsServer::start(Some(64 * 1024));
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b")));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));
    // under the limit: fine
    let r = api.send_sync("/b/x", b"", &vec![7u8; 60_000], opts(5000)).unwrap();
    assert_eq!(r.body.len(), 60_000);
    // a request over it fails at once, and says why
    let t0 = std::time::Instant::now();
    let e = api.send_sync("/b/x", b"", &vec![7u8; 100_000], opts(5000)).unwrap_err();
    assert_eq!(e.status(), Some(Status::TooLarge), "{e}");
    assert!(e.to_string().contains("max_payload"), "{e}");
    assert!(t0.elapsed() < ms(2000));
    // an answer over it: the sender gets TOO_LARGE instead
    let e = api.send_sync("/b/x", b"", b"big:100000", opts(5000)).unwrap_err();
    assert_eq!(e.status(), Some(Status::TooLarge), "{e}");
    assert!(e.to_string().contains("response"), "{e}");
    // and the link goes on
    let r = api.send_sync("/b/x", b"", b"after", opts(5000)).unwrap();
    assert_eq!(r.body, b"after");
}

#[test]
fn mcast_sends_one_copy_per_instance_across_nodes() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/m/", "b").set("count_process", 2)));
    let _c = Core::start(node(&urls, "c", 3).service(tagged!("/m/", "c").set("count_thread", 3)));
    let a = Core::start(node(&urls, "a", 1).service(tagged!("/m/", "a")));
    let mut api = a.client();
    // every node's subscriptions are known on a: 1 + 2 + 3 instances
    let end = std::time::Instant::now() + ms(10_000);
    let ids = loop {
        let ids = api.mcast_async("/m/x", b"", b"hi", opts(5000)).unwrap();
        if ids.len() == 6 || std::time::Instant::now() > end {
            break ids;
        }
        for tid in &ids {
            let _ = api.recv_async(Some(*tid), ms(5000));
        }
        std::thread::sleep(ms(50));
    };
    assert_eq!(ids.len(), 6, "one copy per instance: 1 on a, 2 on b, 3 on c");
    let mut seen = std::collections::HashSet::new();
    let mut tags = vec![];
    for tid in &ids {
        let (_, r) = api.recv_async(Some(*tid), ms(5000)).unwrap().expect("every copy is answered");
        let r = r.unwrap();
        assert_eq!(r.body, b"hi");
        let who = (field(&r, "tag"), field(&r, "pid"), field(&r, "thread"));
        assert!(seen.insert(who.clone()), "two copies reached one instance: {who:?}");
        tags.push(who.0);
    }
    tags.sort();
    assert_eq!(tags, ["a", "b", "b", "c", "c", "c"]);
}

/// Send rules (docs/SECURITY.md) hold across nodes: a sender on node a is
/// refused a name served only on node b by its own rules, on a, with the
/// same UNAUTHORIZED a local name gets; what its rules allow crosses as
/// before, and a sender without rules on a is served by b.
#[test]
fn a_senders_rules_hold_for_names_served_on_another_node() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/open/", "b")).service(tagged!("/secret/", "b")));
    let token = "app-0123456789abcdef";
    let a = Core::start(node(&urls, "a", 1).table(&format!(
        "[[client]]\nname = \"app\"\ntoken = {}\nprefixes = [\"/app/\"]\ndest_list_allow = [\"/open/*\"]",
        q(token)
    )));
    let mut plain = a.client();
    wait_reachable(&mut plain, "/open/x", ms(10_000));
    wait_reachable(&mut plain, "/secret/x", ms(10_000));
    let mut app = Api::connect(Options { token: token.into(), ..Options::unmanaged(a.socket_str(), "/app/") }).unwrap();
    let r = app.send_sync("/open/x", b"", b"", opts(5000)).unwrap();
    assert_eq!(field(&r, "tag"), "b", "answered on node b");
    for name in ["/secret/x", "/nobody/x"] {
        let e = app.send_sync(name, b"", b"", opts(5000));
        assert_eq!(status(&e), Status::Unauthorized, "{name}");
    }
    let ids = app.mcast_async("/secret/m", b"", b"", opts(5000)).unwrap();
    for id in ids {
        let (_, r) = app.recv_async(Some(id), ms(5000)).unwrap().unwrap();
        assert_eq!(status(&r), Status::Unauthorized, "mcast to a refused name on another node");
    }
    let r = plain.send_sync("/secret/x", b"", b"", opts(5000)).unwrap();
    assert_eq!(field(&r, "tag"), "b", "a sender without rules is served there");
}
