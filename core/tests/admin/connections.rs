//! The admin API keeps answering its operator while others hold many
//! connections open without sending a request.

use crate::common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// More than the admin API's 64 connections.
const FLOOD_THREADS: usize = 4;
const PER_THREAD: usize = 40;

/// Keeps `PER_THREAD` connections open, each having sent half a request
/// line, and opens a new one for each the core closes.
fn hold_half_requests(port: u16, stop: &AtomicBool) -> u64 {
    let mut held: Vec<TcpStream> = Vec::new();
    let mut opened = 0;
    while !stop.load(Ordering::Relaxed) {
        held.retain_mut(|s| {
            let mut byte = [0u8; 64];
            match s.read(&mut byte) {
                Ok(0) => false,
                Err(e) if e.kind() == ErrorKind::WouldBlock => true,
                _ => false,
            }
        });
        while held.len() < PER_THREAD {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { break };
            let _ = s.write_all(b"GET /v1/status HT");
            s.set_nonblocking(true).unwrap();
            held.push(s);
            opened += 1;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    opened
}

#[test]
fn idle_half_requests_do_not_lock_the_operator_out() {
    for token in [None, Some("flood-test-t0ken")] {
        let core = TestCore::start_with("", token);
        let stop = Arc::new(AtomicBool::new(false));
        let flood: Vec<_> = (0..FLOOD_THREADS)
            .map(|_| {
                let (stop, port) = (stop.clone(), core.port);
                std::thread::spawn(move || hold_half_requests(port, &stop))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500)); // every slot taken
        for i in 0..20 {
            let started = Instant::now();
            let r = core.try_http("GET", "/v1/status", None, token.map(String::from));
            let took = started.elapsed();
            let r = r.unwrap_or_else(|e| panic!("token {token:?}, call {i}: {e}"));
            assert_eq!(r.status, 200, "token {token:?}, call {i} after {took:?}: {}{}", r.headers, r.body);
            assert!(took < Duration::from_secs(2), "token {token:?}, call {i} took {took:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.store(true, Ordering::Relaxed);
        let opened: u64 = flood.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(opened > 64, "the flood opened only {opened} connections");
        // The flood is in the log, a line per 10 s at most, not per connection.
        let lines: Vec<String> = core
            .log_events()
            .iter()
            .filter(|e| e["level"] != "DEBUG" && e["level"] != "TRACE")
            .filter_map(|e| e["fields"]["message"].as_str().map(String::from))
            .filter(|m| m.contains("admin API") && m.contains("connections"))
            .collect();
        assert!(!lines.is_empty() && lines.len() <= 3, "token {token:?}: {opened} connections, log lines: {lines:#?}");
    }
}
