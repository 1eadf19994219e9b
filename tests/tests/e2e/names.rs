//! Names and patterns from a hostile peer (PROTOCOL.md 6): empty, NUL-holding
//! and over-long names are INVALID_ARGUMENT for every way of sending;
//! over-long patterns, too many wildcards and too many subscriptions are
//! refused; adversarial wildcard patterns do not hold up other clients; and
//! the memory of many subscriptions is given back when they go.

use cumulo_e2e::raw::{self, Body, Cursor, Raw};
use cumulo_e2e::*;
use std::time::{Duration, Instant};

const INVALID_ARGUMENT: u16 = 9;
const NO_SERVICE: u16 = 2;

fn message<T: std::fmt::Debug>(r: &cumulo::Result<T>) -> String {
    match r {
        Err(Error::Status { message, .. }) => message.clone(),
        other => panic!("expected a status error, got {other:?}"),
    }
}

fn served_in_time(api: &mut Api, within: Duration) {
    let t = Instant::now();
    let r = api.send_sync("/echo/x", b"", b"alive", opts(2000));
    assert_eq!(r.unwrap().body, b"alive");
    assert!(t.elapsed() < within, "a request with a 2 s timeout was answered after {:?}", t.elapsed());
}

#[test]
fn empty_nul_and_over_long_names_are_invalid_argument_for_every_send() {
    let long = format!("/echo/{}", "x".repeat(95));
    let core = Core::start(
        Config::new()
            .core("max_name", 100)
            .service(Service::internal("/echo/", "echo").probe("/echo/x"))
            .service(ts!("/front0/").mode("forward").env("TS_FORWARD_TO", ""))
            .service(ts!("/front1/").mode("forward").env("TS_FORWARD_TO", &long)),
    );
    let mut api = core.client();
    // The forwarders are up once they answer (with the error under test).
    for front in ["/front0/x", "/front1/x"] {
        let t = Instant::now();
        while status(&api.send_sync(front, b"", b"", opts(5000))) == Status::NoService {
            assert!(t.elapsed() < Duration::from_secs(10), "{front} never came up");
            std::thread::sleep(ms(50));
        }
    }
    let fits = &long[..100];
    assert_eq!(api.send_sync(fits, b"", b"ok", opts(5000)).unwrap().body, b"ok", "a name of max_name bytes is served");
    let cases = [
        ("", "empty"),
        ("/echo/a\0b", "NUL"),
        (long.as_str(), "101 bytes long, over the limit of 100 (core.max_name)"),
    ];
    for (name, why) in cases {
        let r = api.send_sync(name, b"", b"", opts(5000));
        assert_eq!(status(&r), Status::InvalidArgument, "send_sync to {name:?}");
        assert!(message(&r).contains(why), "{why:?} not in {:?}", message(&r));

        let tid = api.send_async(name, b"", b"", opts(5000));
        let (got, r) = api.recv_async(Some(tid), ms(5000)).unwrap().expect("an answer");
        assert_eq!((got, status(&r)), (tid, Status::InvalidArgument), "send_async to {name:?}");
        assert!(message(&r).contains(why));

        let ids = api.mcast_async(name, b"", b"", opts(5000)).unwrap();
        assert_eq!(ids.len(), 1, "one copy, failed at once, tells why");
        let (_, r) = api.recv_async(Some(ids[0]), ms(5000)).unwrap().expect("an answer");
        assert_eq!(status(&r), Status::InvalidArgument, "mcast to {name:?}");
        assert!(message(&r).contains(why));
    }
    // A service forwarding to a bad name: the original sender learns why.
    let r = api.send_sync("/front0/x", b"", b"", opts(5000));
    assert_eq!(status(&r), Status::InvalidArgument);
    assert!(message(&r).contains("empty"), "{}", message(&r));
    let r = api.send_sync("/front1/x", b"", b"", opts(5000));
    assert_eq!(status(&r), Status::InvalidArgument);
    assert!(message(&r).contains("core.max_name"), "{}", message(&r));
    served_in_time(&mut api, ms(1000));
}

#[test]
fn a_name_with_nul_in_a_raw_frame_is_invalid_argument() {
    let core = Core::start(Config::new().service(Service::internal("/echo/", "echo").probe("/echo/x")));
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(1, "/raw/");
    let tid = raw::trans_id(w.node_id, w.instance_id);
    c.write(&raw::send(raw::SEND_SYNC, &tid, 2000, "/echo/\0", b""));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!(t, raw::RESPONSE);
    let mut r = Cursor(&b);
    assert_eq!(r.tid(), tid);
    assert_eq!(r.u16(), INVALID_ARGUMENT);
}

#[test]
fn over_limit_patterns_and_subscriptions_are_refused() {
    let core =
        Core::start(Config::new().core("max_pattern", 64).core("max_wildcards", 2).core("max_subscriptions", 10));
    let mut api = Api::connect(Options::unmanaged(core.socket_str(), "/s/")).unwrap();
    let h = |_: &mut Api, _: &cumulo::Request<'_>| -> cumulo::HandlerResult { Ok(cumulo::Answer::body("x")) };
    let r = api.subscribe("a*b?c*", h);
    assert_eq!(status(&r), Status::InvalidArgument);
    assert!(message(&r).contains("3 wildcards") && message(&r).contains("core.max_wildcards"), "{}", message(&r));
    let r = api.subscribe(&"p".repeat(62), h);
    assert_eq!(status(&r), Status::InvalidArgument);
    assert!(message(&r).contains("65 bytes long") && message(&r).contains("core.max_pattern"), "{}", message(&r));
    for i in 0..10 {
        api.subscribe(&format!("{i}/*"), h).unwrap();
    }
    let r = api.subscribe("one/more", h);
    assert_eq!(status(&r), Status::InvalidArgument);
    assert!(message(&r).contains("10 subscriptions (core.max_subscriptions)"), "{}", message(&r));
    api.unsubscribe("3/*").unwrap();
    api.subscribe("one/more", h).unwrap();
    // The limit is per instance: another one subscribes as usual.
    let mut other = Api::connect(Options::unmanaged(core.socket_str(), "/t/")).unwrap();
    other.subscribe("a/?", h).unwrap();
}

/// Subscribes `patterns` on a raw connection (pipelined), each answered OK.
fn subscribe_all(c: &mut Raw, patterns: &[String]) {
    let mut bytes = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        bytes.extend(Body::new().u32(i as u32).str(p).frame(raw::SUBSCRIBE));
    }
    c.write(&bytes);
    for _ in patterns {
        let (t, b) = c.frame(Duration::from_secs(20));
        assert_eq!(t, raw::REPLY);
        let mut r = Cursor(&b);
        let (id, st) = (r.u32(), r.u16());
        assert_eq!(st, 0, "subscription {id} ({}) refused", patterns[id as usize]);
    }
}

/// SEND_ASYNC of every name at once, then their RESPONSEs' statuses.
fn send_all(c: &mut Raw, w: &raw::Welcome, names: &[String]) -> Vec<[u8; 16]> {
    let mut bytes = Vec::new();
    let mut tids = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let mut tid = raw::trans_id(w.node_id, w.instance_id);
        let nanos = u64::from_be_bytes(tid[..8].try_into().unwrap()) + k as u64;
        tid[..8].copy_from_slice(&nanos.to_be_bytes());
        bytes.extend(raw::send(raw::SEND_ASYNC, &tid, 30_000, name, b""));
        tids.push(tid);
    }
    c.write(&bytes);
    tids
}

#[test]
fn adversarial_patterns_do_not_hold_up_other_clients() {
    // The default limits: 4 KiB names and patterns, 8 wildcards, 1024
    // subscriptions per instance.
    let core = Core::start(Config::new().service(Service::internal("/echo/", "echo").probe("/echo/x")));
    let mut api = core.client();
    served_in_time(&mut api, ms(1000));
    // One peer: a star then a long literal (the old matcher's worst case:
    // pattern x name steps for each). Another: the most wildcards, each
    // block found once per `/`-separated segment of the name.
    let long: Vec<String> = (0..1024).map(|i| format!("*{}?{i}*b", "a".repeat(4000))).collect();
    let many: Vec<String> = (0..1024).map(|i| format!("{}{i}?b", "*a/?a/".repeat(3))).collect();
    let mut peers = Vec::new();
    for patterns in [&long, &many] {
        let mut c = Raw::connect(&core.socket);
        let w = c.handshake(1, "/evil/");
        subscribe_all(&mut c, patterns);
        peers.push((c, w));
    }
    // Names that come close to matching every one of them: each costs a
    // lookup that tries all 1024 patterns of its peer (tens of ms; the old
    // matcher took seconds per pattern x name).
    let names: Vec<Vec<String>> = vec![
        (0..2).map(|k| format!("/evil/{}{k}b", "a".repeat(4080))).collect(),
        (0..2).map(|k| format!("/evil/{}{k}b", "a/".repeat(2040))).collect(),
    ];
    assert!(names.iter().flatten().all(|n| n.len() <= 4096));
    let t = Instant::now();
    let mut sent = Vec::new();
    for ((c, w), names) in peers.iter_mut().zip(&names) {
        sent.push(send_all(c, w, names));
    }
    for _ in 0..5 {
        served_in_time(&mut api, ms(1000));
    }
    for ((c, _), tids) in peers.iter_mut().zip(&sent) {
        for _ in tids {
            let (ty, b) = c.frame(Duration::from_secs(10));
            assert_eq!(ty, raw::RESPONSE);
            let mut r = Cursor(&b);
            let tid = r.tid();
            assert!(tids.contains(&tid));
            assert_eq!(r.u16(), NO_SERVICE, "a near miss matches nothing");
        }
    }
    assert!(t.elapsed() < Duration::from_secs(5), "4 lookups took {:?}", t.elapsed());
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn memory_comes_back_after_many_subscriptions_close() {
    let core = Core::start(
        Config::new()
            .core("max_subscriptions", 20_000)
            .core("keepalive", 200)
            .service(Service::internal("/echo/", "echo").probe("/echo/x")),
    );
    let mut api = core.client();
    served_in_time(&mut api, ms(1000));
    let start = rss_kib(core.pid);
    let mut peers = Vec::new();
    for p in 0..4 {
        let mut c = Raw::connect(&core.socket);
        c.handshake(1, &format!("/m{p}/"));
        let patterns: Vec<String> = (0..20_000).map(|i| format!("{i}/{}/*", "s".repeat(1000))).collect();
        subscribe_all(&mut c, &patterns);
        peers.push(c);
    }
    let peak = rss_kib(core.pid);
    assert!(peak > start + 60_000, "80,000 subscriptions of 1 KB took memory: {start} -> {peak} KiB");
    drop(peers);
    // What the allocator keeps after trimming: up to 16 MiB per thread of
    // the core, each shard's thread allocating from an arena of its own.
    let want = 2 * start + 16_384 * u64::from(cumulo_e2e::config::test_threads());
    let t = Instant::now();
    let mut now = peak;
    while t.elapsed() < Duration::from_secs(10) {
        now = rss_kib(core.pid);
        if now <= want {
            break;
        }
        std::thread::sleep(ms(100));
    }
    assert!(now <= want, "RSS {now} KiB after the subscriptions went (start {start}, peak {peak}, want <= {want})");
    served_in_time(&mut api, ms(1000));
}
