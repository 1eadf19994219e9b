//! Frames a well-behaved SDK never sends: each gets an ERROR frame with the
//! right status and the connection closed, while other clients are served.

use cumulo_e2e::raw::{self, Body, Raw};
use cumulo_e2e::*;
use std::time::Duration;

const MALFORMED: u16 = 5;
const TOO_LARGE: u16 = 8;
const INVALID_ARGUMENT: u16 = 9;
const UNSUPPORTED_VERSION: u16 = 10;
const UNAUTHORIZED: u16 = 11;
const PROTOCOL: u16 = 12;

fn core() -> Core {
    Core::start(Config::new().core("max_frame", 1024).service(Service::internal("/echo/", "echo").probe("/echo/x")))
}

/// Writes `bytes` on a fresh connection (after a HELLO if `hello`) and
/// checks the ERROR status and that the core closes the connection.
fn rejected(core: &Core, hello: bool, bytes: &[u8], want: u16) -> String {
    let mut c = Raw::connect(&core.socket);
    if hello {
        c.handshake(1, "/raw/");
    }
    c.write(bytes);
    let (status, msg) = c.expect_error(Duration::from_secs(5));
    assert_eq!(status, want, "for {bytes:02x?}: {msg}");
    c.expect_closed(Duration::from_secs(5));
    msg
}

fn still_served(api: &mut Api) {
    assert_eq!(api.send_sync("/echo/x", b"", b"alive", opts(5000)).unwrap().body, b"alive");
}

#[test]
fn bad_frames_before_hello() {
    let core = core();
    let mut api = core.client();
    still_served(&mut api);
    let send = raw::send(raw::SEND_ASYNC, &raw::trans_id(1, 1), 1000, "/echo/x", b"");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        // "GET " read as a length is far over max_frame.
        ("http garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), TOO_LARGE),
        ("zero length", vec![0, 0, 0, 0], MALFORMED),
        ("unknown type", Body::new().frame(0x7e), MALFORMED),
        ("truncated hello", Body::new().u16(1).u32(1).frame(raw::HELLO), MALFORMED),
        (
            "hello with a trailing byte",
            Body::new().u16(1).u32(1).u32(0).str("").str("/raw/").u8(0).frame(raw::HELLO),
            MALFORMED,
        ),
        (
            "prefix not UTF-8",
            Body::new().u16(1).u32(1).u32(0).str("").u16(2).raw(&[0xff, 0xfe]).frame(raw::HELLO),
            MALFORMED,
        ),
        ("send before hello", send, PROTOCOL),
        ("a length prefix of 4 GiB", vec![0xff; 4], TOO_LARGE),
        ("version 0", raw::hello(0, 1, "", "/raw/"), UNSUPPORTED_VERSION),
        ("unknown token", raw::hello(1, 1, "not-a-token", ""), UNAUTHORIZED),
        ("prefix without /", raw::hello(1, 1, "", "raw"), INVALID_ARGUMENT),
    ];
    for (what, bytes, want) in cases {
        eprintln!("case: {what}");
        rejected(&core, false, &bytes, want);
        still_served(&mut api);
    }
}

#[test]
fn a_length_over_max_frame_is_refused_before_its_body() {
    let core = core();
    let mut api = core.client();
    // Only the 4-byte length: the core must not wait for the 2000 bytes.
    let msg = rejected(&core, false, &2000u32.to_le_bytes(), TOO_LARGE);
    assert!(msg.contains("2000") && msg.contains("1024"), "{msg}");
    rejected(&core, true, &1025u32.to_le_bytes(), TOO_LARGE);
    // A SEND of exactly max_frame bytes (type byte + body) is accepted.
    let name = "/echo/x";
    let fixed = 1 + 16 + 4 + 1 + 1 + 2 + name.len() + 4 + 4;
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(1, "/raw/");
    assert_eq!(w.max_frame, 1024);
    let tid = raw::trans_id(w.node_id, w.instance_id);
    let f = raw::send(raw::SEND_SYNC, &tid, 5000, name, &vec![7u8; 1024 - fixed]);
    assert_eq!(f.len(), 4 + 1024);
    c.write(&f);
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!(t, raw::RESPONSE);
    assert_eq!(raw::Cursor(&b[16..18]).u16(), 0);
    still_served(&mut api);
}

#[test]
fn bad_frames_after_hello() {
    let core = core();
    let mut api = core.client();
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("zero length", vec![0, 0, 0, 0], MALFORMED),
        ("unknown type", Body::new().u32(1).frame(0x7e), MALFORMED),
        ("ping with trailing byte", Body::new().u64(1).u8(0).frame(raw::PING), MALFORMED),
        ("truncated return", Body::new().raw(&[0; 10]).frame(raw::RETURN), MALFORMED),
        ("hello twice", raw::hello(1, 1, "", "/raw/"), PROTOCOL),
        ("a core-to-instance frame", Body::new().u32(100).frame(raw::TERMINATE), PROTOCOL),
        (
            "a REQUEST, which only the core sends",
            Body::new()
                .raw(&[0; 16])
                .u32(1000)
                .u8(0)
                .u8(0)
                .u64(0)
                .str("/echo/x")
                .str("/echo/*")
                .bytes(b"")
                .bytes(b"")
                .frame(raw::REQUEST),
            PROTOCOL,
        ),
        (
            "a RESPONSE, which only the core sends",
            Body::new().raw(&[0; 16]).u16(0).bytes(b"").bytes(b"").frame(raw::RESPONSE),
            PROTOCOL,
        ),
        ("a WELCOME, which only the core sends", Body::new().frame(raw::WELCOME), MALFORMED),
        ("a length prefix of 4 GiB", vec![0xff; 4], TOO_LARGE),
        (
            "a name whose length runs past the frame",
            Body::new().raw(&[0; 16]).u32(1000).u8(0).u8(0).u16(100).raw(b"/echo").frame(raw::SEND_ASYNC),
            MALFORMED,
        ),
        (
            "a body whose length runs past the frame",
            Body::new()
                .raw(&[0; 16])
                .u32(1000)
                .u8(0)
                .u8(0)
                .str("/echo/x")
                .bytes(b"")
                .u32(0xffff_fff0)
                .raw(b"abc")
                .frame(raw::SEND_SYNC),
            MALFORMED,
        ),
        (
            "a name that is not UTF-8",
            Body::new()
                .raw(&[0; 16])
                .u32(1000)
                .u8(0)
                .u8(0)
                .u16(2)
                .raw(&[0xc3, 0x28])
                .bytes(b"")
                .bytes(b"")
                .frame(raw::SEND_ASYNC),
            MALFORMED,
        ),
    ];
    for (what, bytes, want) in cases {
        eprintln!("case: {what}");
        rejected(&core, true, &bytes, want);
        still_served(&mut api);
    }
}

#[test]
fn a_well_formed_send_with_a_bad_value_gets_a_response_and_the_connection_stays() {
    let core = core();
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(1, "/raw/");
    // A trans_id stamped with another instance's id.
    let tid = raw::trans_id(w.node_id, w.instance_id + 1000);
    c.write(&raw::send(raw::SEND_ASYNC, &tid, 1000, "/echo/x", b""));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!(t, raw::RESPONSE);
    let mut r = raw::Cursor(&b);
    assert_eq!(r.tid(), tid);
    assert_eq!(r.u16(), MALFORMED);
    // Still open: a PING gets its PONG, a good send its answer.
    c.write(&Body::new().u64(42).frame(raw::PING));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!((t, raw::Cursor(&b).u64()), (raw::PONG, 42));
    let good = raw::trans_id(w.node_id, w.instance_id);
    c.write(&raw::send(raw::SEND_SYNC, &good, 5000, "/echo/x", b"ok"));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!(t, raw::RESPONSE);
    let mut r = raw::Cursor(&b);
    assert_eq!((r.tid(), r.u16()), (good, 0));
}

#[test]
fn a_trans_id_already_in_flight_is_refused_and_the_first_still_ends_once() {
    let core = core();
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(1, "/raw/");
    let tid = raw::trans_id(w.node_id, w.instance_id);
    // Waits for a subscriber that never comes: in flight for 500 ms.
    let waiting =
        Body::new().raw(&tid).u32(500).u8(0).u8(1).str("/nobody/x").bytes(b"").bytes(b"").frame(raw::SEND_ASYNC);
    c.write(&waiting);
    c.write(&raw::send(raw::SEND_ASYNC, &tid, 500, "/echo/x", b""));
    let mut statuses = vec![];
    for _ in 0..2 {
        let (t, b) = c.frame(Duration::from_secs(5));
        assert_eq!(t, raw::RESPONSE);
        let mut r = raw::Cursor(&b);
        assert_eq!(r.tid(), tid);
        statuses.push(r.u16());
    }
    assert_eq!(statuses, [MALFORMED, 1 /* TIMEOUT */]);
    assert_eq!(c.read(Duration::from_millis(300)), raw::Got::Nothing, "exactly one response each");
}

#[test]
fn out_of_order_answers_are_ignored_and_the_connection_stays() {
    let core = core();
    let mut c = Raw::connect(&core.socket);
    let w = c.handshake(1, "/raw/");
    let stranger = raw::trans_id(w.node_id, 999);
    // RETURN and FORWARD of a trans_id never delivered to it: nobody waits
    // for them, so they are dropped (counted as late), not an error.
    c.write(&raw::ret(&stranger, 0, b"unasked"));
    c.write(&raw::send(raw::FORWARD, &stranger, 1000, "/echo/x", b""));
    c.write(&Body::new().u64(7).frame(raw::PING));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!((t, raw::Cursor(&b).u64()), (raw::PONG, 7), "nothing before the PONG");
    // GOODBYE ends its subscriptions but it may still send.
    assert_eq!(c.subscribe(1, "x"), 0);
    c.write(&Body::new().frame(raw::GOODBYE));
    let tid = raw::trans_id(w.node_id, w.instance_id);
    c.write(&raw::send(raw::SEND_SYNC, &tid, 5000, "/raw/x", b""));
    let (t, b) = c.frame(Duration::from_secs(5));
    assert_eq!(t, raw::RESPONSE);
    let mut r = raw::Cursor(&b);
    assert_eq!((r.tid(), r.u16()), (tid, 2 /* NO_SERVICE: unsubscribed */));
}

#[test]
fn frames_cut_mid_way_then_closed_leave_nothing_behind() {
    // Two connections at most: a cut connection the core failed to clean up
    // would hold a place and refuse the clients at the end.
    let core = Core::start(
        Config::new().core("max_connections", 3).service(Service::internal("/echo/", "echo").probe("/echo/x")),
    );
    let hello = raw::hello(1, 1, "", "/raw/");
    for round in 0..10 {
        let mut c = Raw::connect(&core.socket);
        match round % 3 {
            0 => c.write(&hello[..hello.len() / 2]), // HELLO cut
            1 => {
                c.handshake(1, "/raw/");
                let tid = raw::trans_id(1, 0);
                let send = raw::send(raw::SEND_SYNC, &tid, 1000, "/echo/x", b"cut");
                c.write(&send[..send.len() - 2]); // SEND cut
            }
            _ => {
                c.handshake(1, "/raw/");
                c.write(&[3, 0]); // a length prefix cut
            }
        }
        drop(c);
    }
    let mut a = core.client();
    let mut b = core.client();
    still_served(&mut a);
    still_served(&mut b);
}

#[test]
fn a_well_behaved_client_is_served_while_others_send_garbage() {
    let core = core();
    let socket = core.socket.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacks: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        vec![0xff; 4],
        vec![0, 0, 0, 0],
        Body::new().u16(1).frame(raw::HELLO),
        Body::new().u32(100).frame(raw::TERMINATE),
    ];
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut c = Raw::connect(&socket);
                if n % 2 == 1 {
                    c.handshake(1, "/raw/");
                }
                c.write(&attacks[n as usize % attacks.len()]);
                let (status, _) = c.expect_error(Duration::from_secs(5));
                assert!([MALFORMED, TOO_LARGE, PROTOCOL].contains(&status), "{status}");
                n += 1;
            }
            n
        })
    };
    let mut api = core.client();
    for i in 0..200u32 {
        let body = format!("request {i}");
        let t = std::time::Instant::now();
        let r = api.send_sync("/echo/x", b"", body.as_bytes(), opts(5000)).unwrap();
        assert_eq!(r.body, body.as_bytes());
        assert!(t.elapsed() < Duration::from_secs(2), "answered after {:?}", t.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let attacks = attacker.join().unwrap();
    assert!(attacks >= 5, "the attack ran ({attacks} bad connections)");
}
