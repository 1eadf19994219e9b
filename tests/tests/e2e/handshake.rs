//! The handshake: a connection that never sends HELLO is closed after
//! `core.hello_timeout` with an ERROR saying why; WELCOME carries the
//! instance's settings; limits on who may connect.

use cumulo_e2e::raw::Raw;
use cumulo_e2e::*;
use std::time::{Duration, Instant};

const PROTOCOL: u16 = 12;

#[test]
fn silent_and_half_spoken_connections_are_closed_after_hello_timeout() {
    let core = Core::start(
        Config::new().core("hello_timeout", 1500).service(Service::internal("/echo/", "echo").probe("/echo/x")),
    );
    let t = Instant::now();
    let mut silent = Raw::connect(&core.socket);
    let mut partial = Raw::connect(&core.socket);
    partial.write(&[9, 0]); // half a length prefix
    let mut api = core.client();
    // Meanwhile the core serves others.
    assert!(api.send_sync("/echo/x", b"", b"", opts(5000)).is_ok());
    for c in [&mut silent, &mut partial] {
        let (status, msg) = c.expect_error(Duration::from_secs(10));
        let took = t.elapsed();
        assert_eq!(status, PROTOCOL, "{msg}");
        assert!(msg.contains("hello_timeout"), "{msg}");
        assert!(took >= ms(1400) && took < ms(5000), "closed after {took:?}");
        c.expect_closed(Duration::from_secs(3));
    }
    assert!(api.send_sync("/echo/x", b"", b"", opts(5000)).is_ok());
}

#[test]
fn the_default_hello_timeout_is_10_s() {
    let core = Core::start(Config::new());
    let t = Instant::now();
    let mut silent = Raw::connect(&core.socket);
    let (status, msg) = silent.expect_error(Duration::from_secs(20));
    assert_eq!(status, PROTOCOL, "{msg}");
    assert!(msg.contains("10000 ms"), "{msg}");
    assert!(t.elapsed() >= ms(9500), "closed after {:?}", t.elapsed());
}

#[test]
fn unmanaged_clients_can_be_refused() {
    let core = Core::start(Config::new().core("allow_unmanaged", false));
    let mut c = Raw::connect(&core.socket);
    c.write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
    let (status, msg) = c.expect_error(Duration::from_secs(5));
    assert_eq!(status, 11, "UNAUTHORIZED: {msg}");
    c.expect_closed(Duration::from_secs(5));
}

#[test]
fn welcome_tells_the_instance_its_settings() {
    let core = Core::start(Config::new().core("keepalive", 1234).core("node_id", 7).core("max_frame", 4096));
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(0, "/mine/");
    assert_eq!((w.window, w.node_id, w.keepalive, w.max_frame), (1, 7, 1234, 4096), "window 0 is taken as 1");
    assert_eq!(w.prefix, "/mine/");
    assert_ne!(w.instance_id, 0, "instance_id 0 is the core's");
}

#[test]
fn connections_over_max_connections_are_refused_and_the_rest_served() {
    let core = Core::start(Config::new().core("max_connections", 2));
    let mut first = core.client();
    let _second = core.client();
    let mut third = Raw::connect(&core.socket);
    // Refused on connecting: the HELLO may find the connection closed.
    third.try_write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
    let (status, msg) = third.expect_error(Duration::from_secs(5));
    assert_eq!(status, 9, "INVALID_ARGUMENT: {msg}");
    assert!(msg.contains("connection limit"), "{msg}");
    third.expect_closed(Duration::from_secs(5));
    // The admitted clients keep working: the refusal cost them nothing.
    assert_eq!(first.subscribe_count("x").unwrap(), 0);
}

/// VmRSS of a process, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kb * 1024
}

const TOO_LARGE: u16 = 8;
/// The largest HELLO, after the length prefix (PROTOCOL.md 4.1).
const MAX_HELLO: u32 = 1 + 2 + 4 + 4 + 2 * (2 + 65535);

#[test]
fn a_first_frame_larger_than_any_hello_is_refused_before_its_body() {
    let core = Core::start(Config::new());
    let mut c = Raw::connect(&core.socket);
    // Under max_frame (8 MiB), over the largest HELLO there can be.
    c.write(&(MAX_HELLO + 1).to_le_bytes());
    let t = Instant::now();
    let (status, msg) = c.expect_error(Duration::from_secs(5));
    assert_eq!(status, TOO_LARGE, "{msg}");
    assert!(msg.contains("HELLO") && msg.contains(&MAX_HELLO.to_string()), "{msg}");
    assert!(t.elapsed() < ms(2000), "refused after {:?}", t.elapsed());
    c.expect_closed(Duration::from_secs(5));
    // The largest possible HELLO is still read (and this one refused for
    // its unknown token, not its size).
    let mut big = Raw::connect(&core.socket);
    let token = "t".repeat(65535);
    big.write(&cumulo_e2e::raw::hello(1, 1, &token, &"p".repeat(65535)));
    let (status, msg) = big.expect_error(Duration::from_secs(5));
    assert_eq!(status, 11, "UNAUTHORIZED: {msg}");
}

#[test]
fn large_first_frames_cost_the_core_no_memory() {
    let core = Core::start(Config::new().core("hello_timeout", 60_000));
    let before = rss(core.pid);
    // Each announces an 8 MiB HELLO and sends half of it: a core that
    // buffered them would hold 200 MB.
    let chunk = vec![0u8; 4 << 20];
    let conns: Vec<Raw> = (0..50)
        .map(|_| {
            let mut c = Raw::connect(&core.socket);
            c.stream.set_write_timeout(Some(ms(2000))).unwrap();
            let _ = std::io::Write::write_all(&mut c.stream, &(8u32 << 20).to_le_bytes());
            let _ = std::io::Write::write_all(&mut c.stream, &chunk);
            c
        })
        .collect();
    std::thread::sleep(ms(300));
    let grown = rss(core.pid).saturating_sub(before);
    assert!(grown < 40 << 20, "the core's RSS grew by {} MB", grown >> 20);
    drop(conns);
    assert!(core.client().subscribe_count("x").is_ok());
}

#[test]
fn connections_in_the_handshake_count_against_max_connections() {
    let core = Core::start(Config::new().core("max_connections", 3).core("hello_timeout", 60_000));
    let silent: Vec<Raw> = (0..3).map(|_| Raw::connect(&core.socket)).collect();
    std::thread::sleep(ms(300)); // accepted by now
    let mut fourth = Raw::connect(&core.socket);
    fourth.try_write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
    let (status, msg) = fourth.expect_error(Duration::from_secs(5));
    assert_eq!(status, 9, "INVALID_ARGUMENT: {msg}");
    assert!(msg.contains("max_connections"), "{msg}");
    drop(silent);
    // Their places are free again once the core sees them close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = Raw::connect(&core.socket);
        c.try_write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
        match c.frame(Duration::from_secs(5)) {
            (0x81, _) => break,
            (t, b) => assert!(Instant::now() < deadline, "still refused: {t:#x} {b:?}"),
        }
        std::thread::sleep(ms(50));
    }
}

#[test]
fn refusals_in_the_handshake_are_logged_once_per_interval_with_peer_and_reason() {
    let core = Core::start(Config::new().core("max_connections", 2));
    let me = format!("pid {}", std::process::id());
    // Garbage first: a zero length.
    for _ in 0..30 {
        let mut c = Raw::connect(&core.socket);
        c.write(&[0, 0, 0, 0]);
        c.expect_error(Duration::from_secs(5));
    }
    let lines = core.wait_lines(&["refused", "handshake", &me, "zero length"], 1, Duration::from_secs(5));
    assert!(lines[0].contains("refused 1 "), "{}", lines[0]);
    // Over max_connections: the two admitted clients, then 30 refused.
    let _a = core.client();
    let _b = core.client();
    for _ in 0..30 {
        let mut c = Raw::connect(&core.socket);
        c.try_write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
        let (status, _) = c.expect_error(Duration::from_secs(5));
        assert_eq!(status, 9);
    }
    core.wait_lines(&["refused", "max_connections", &me], 1, Duration::from_secs(5));
    std::thread::sleep(ms(300));
    assert_eq!(core.lines_with(&["refused", "handshake"]).len(), 1, "{}", core.log());
    assert_eq!(core.lines_with(&["refused", "max_connections"]).len(), 1, "{}", core.log());
}
