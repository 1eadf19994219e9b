//! HTTP gateways with the core on two threads (`core.threads = 2`): every
//! shard listens on a gateway's port, and a gateway added, restarted or
//! removed through the admin API is so on every shard. The listening
//! sockets are counted in /proc/net/tcp (each shard's is one line, as
//! SO_REUSEPORT lets them share the port).

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sockets listening on 127.0.0.1:`port` in this network namespace.
fn listeners(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[1] == local && f[3] == "0A"
        })
        .count()
}

fn wait_listeners(port: u16, want: usize) {
    let end = Instant::now() + Duration::from_secs(10);
    while listeners(port) != want {
        assert!(Instant::now() < end, "port {port}: {} listeners, want {want}", listeners(port));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether a new connection to the gateway gets an HTTP answer.
fn answers(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if s.write_all(b"GET /nothing/here HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 ")
}

fn gateway(port: u16) -> String {
    format!("[[service]]\nprefix = \"/\"\ninternal = \"http\"\n[service.settings]\nport = {port}\n")
}

#[test]
fn a_gateway_runs_on_every_shard_and_goes_from_every_shard_when_removed() {
    let port = free_port();
    let core = TestCore::start_threads(&gateway(port), 2);
    core.wait_running(1, 2); // an instance on each shard
    wait_listeners(port, 2);
    assert!((0..40).all(|_| answers(port)), "every connection is answered, on whichever shard");

    let r = core.http("POST", "/v1/services/1/restart", None);
    assert!(r.status < 300, "{} {}", r.status, r.body);
    core.wait_running(1, 2); // an instance on each shard
    wait_listeners(port, 2);
    assert!((0..40).all(|_| answers(port)), "answered after a restart");

    let r = core.http("DELETE", "/v1/services/1", None);
    assert!(r.status < 300, "{} {}", r.status, r.body);
    wait_listeners(port, 0);
    assert!((0..40).all(|_| TcpStream::connect(("127.0.0.1", port)).is_err()), "no shard listens any more");

    let added = free_port();
    let body = serde_json::json!({ "prefix": "/", "internal": "http", "settings": { "port": added } });
    let r = core.http("POST", "/v1/services", Some(&body.to_string()));
    assert_eq!(r.status, 201, "{}", r.body);
    wait_listeners(added, 2);
    assert!((0..40).all(|_| answers(added)), "a gateway added at run time is answered on every shard");
}
