//! Windows: the core delivers up to `window` requests to an instance before
//! any is answered, and queues the rest.

use cumulo_e2e::raw::{self, Got, Raw};
use cumulo_e2e::*;
use std::time::Duration;

/// A raw instance under `/win/` asking for `window`, and a client sending it
/// `sent` requests; returns the WELCOME's window, the requests delivered
/// before any is answered, the instance and the client (whose requests stay
/// in flight while it is open).
fn deliveries(core: &Core, window: u32, sent: usize) -> (u32, Vec<raw::Request>, Raw, Api) {
    let mut rx = Raw::connect(&core.socket);
    let w = rx.handshake(window, "/win/");
    assert_eq!(rx.subscribe(1, "x"), 0);
    let mut api = core.client();
    for i in 0..sent {
        api.send_async("/win/x", b"", format!("r{i}").as_bytes(), opts(10_000));
    }
    api.flush().unwrap();
    let mut got = vec![];
    loop {
        match rx.read(Duration::from_millis(if got.len() < w.window as usize { 5000 } else { 500 })) {
            Got::Frame(raw::REQUEST, b) => got.push(raw::parse_request(&b)),
            Got::Frame(raw::PING, _) => {}
            Got::Nothing => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    (w.window, got, rx, api)
}

#[test]
fn window_4_gets_4_requests_at_once_and_the_rest_after_returns() {
    let core = Core::start(Config::new());
    let (window, got, mut rx, _client) = deliveries(&core, 4, 6);
    assert_eq!(window, 4);
    assert_eq!(got.len(), 4, "delivered before any RETURN");
    let names: Vec<_> = got.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    assert_eq!(names, ["r0", "r1", "r2", "r3"]);
    // Each RETURN frees one slot: the next queued request follows.
    rx.write(&raw::ret(&got[0].trans_id, 0, b"done"));
    let (t, b) = rx.frame(Duration::from_secs(5));
    assert_eq!(t, raw::REQUEST);
    assert_eq!(raw::parse_request(&b).body, b"r4");
    assert_eq!(rx.read(Duration::from_millis(300)), Got::Nothing, "still 4 in flight: no 6th yet");
}

#[test]
fn window_1_gets_one_at_a_time() {
    let core = Core::start(Config::new());
    let (window, got, _rx, _client) = deliveries(&core, 1, 3);
    assert_eq!((window, got.len()), (1, 1));
}

#[test]
fn the_window_is_capped_by_max_window() {
    let core = Core::start(Config::new().unmanaged("max_window", 2));
    let (window, got, _rx, _client) = deliveries(&core, 4, 5);
    assert_eq!((window, got.len()), (2, 2));
}

#[test]
fn a_managed_instance_with_window_4_answers_all() {
    let core = Core::start(Config::new().service(ts!("/w4/").env("TS_WINDOW", 4)));
    let mut api = core.client();
    let tids: Vec<_> = (0..12).map(|i| api.send_async("/w4/x", b"", format!("{i}").as_bytes(), opts(5000))).collect();
    for (i, t) in tids.iter().enumerate() {
        let r = api.recv_async(Some(*t), ms(5000)).unwrap().expect("answer").1.unwrap();
        assert_eq!(r.body, i.to_string().as_bytes());
    }
}
