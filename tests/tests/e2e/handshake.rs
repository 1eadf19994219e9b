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
        Config::new()
            .core("hello_timeout", 1500)
            .service(Service::internal("/echo/", "echo").probe("/echo/x")),
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
    let core = Core::start(
        Config::new()
            .core("keepalive", 1234)
            .core("node_id", 7)
            .core("max_frame", 4096),
    );
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(0, "/mine/");
    assert_eq!(
        (w.window, w.node_id, w.keepalive, w.max_frame),
        (1, 7, 1234, 4096),
        "window 0 is taken as 1"
    );
    assert_eq!(w.prefix, "/mine/");
    assert_ne!(w.instance_id, 0, "instance_id 0 is the core's");
}

#[test]
fn connections_over_max_connections_are_refused_and_the_rest_served() {
    let core = Core::start(Config::new().core("max_connections", 2));
    let mut first = core.client();
    let _second = core.client();
    let mut third = Raw::connect(&core.socket);
    third.write(&cumulo_e2e::raw::hello(1, 1, "", "/client/"));
    let (status, msg) = third.expect_error(Duration::from_secs(5));
    assert_eq!(status, 9, "INVALID_ARGUMENT: {msg}");
    assert!(msg.contains("connection limit"), "{msg}");
    third.expect_closed(Duration::from_secs(5));
    // The admitted clients keep working: the refusal cost them nothing.
    assert_eq!(first.subscribe_count("x").unwrap(), 0);
}
