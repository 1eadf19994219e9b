//! The `tcp` and `udp` bridges (crates/bridge, docs/BRIDGES.md): raw
//! sockets from the test process, messages sent on to the built-in `echo`
//! service through the real core.

use cumulo_e2e::*;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// How long a test waits for one answer.
const WAIT: Duration = Duration::from_secs(10);

/// A core with `echo` at `/echo/` and a bridge of `kind` at `port` sending
/// to `/echo/x`, with these extra settings (TOML pairs).
fn core_with(kind: &str, port: u16, extra: &str, admin: Option<u16>) -> Core {
    let mut settings = format!("port = {port}, dest = \"/echo/x\"");
    if !extra.is_empty() {
        settings.push_str(", ");
        settings.push_str(extra);
    }
    let mut cfg = Config::new()
        .service(Service::internal("/echo/", "echo").probe("/echo/x"))
        .service(Service::internal(&format!("/bridge/{kind}/"), kind).set("settings", format!("{{ {settings} }}")));
    if let Some(p) = admin {
        cfg = cfg.admin("port", p);
    }
    Core::start(cfg)
}

/// A connection to the tcp bridge, once it listens.
fn connect(core: &Core, port: u16) -> TcpStream {
    let deadline = Instant::now() + WAIT;
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(WAIT)).unwrap();
                return s;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "the tcp bridge did not listen: {e}; log:\n{}", core.log());
                std::thread::sleep(ms(20));
            }
        }
    }
}

fn lines(s: &TcpStream) -> BufReader<TcpStream> {
    BufReader::new(s.try_clone().unwrap())
}

fn read_line(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).unwrap_or_else(|e| panic!("no answer: {e}"));
    line
}

fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

fn read_framed(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap_or_else(|e| panic!("no answer: {e}"));
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

/// Reads until the bridge closes the connection: within `limit`, or panics.
fn read_to_close(s: &mut TcpStream, limit: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => got,
        Err(e) if e.kind() == ErrorKind::ConnectionReset => got,
        Err(e) => panic!("the connection was not closed within {limit:?}: {e} (got {got:?})"),
    }
}

#[test]
fn tcp_line_framing_round_trips_with_crlf_and_pipelined_messages() {
    let port = free_port();
    let core = core_with("tcp", port, "", None);
    let s = connect(&core, port);
    let mut r = lines(&s);
    (&s).write_all(b"hello\r\nworld\n\n").unwrap();
    assert_eq!(read_line(&mut r), "hello\n");
    assert_eq!(read_line(&mut r), "world\n");
    assert_eq!(read_line(&mut r), "\n");
    // Many messages in one write: every answer, in the messages' order.
    let batch: String = (0..200).map(|i| format!("m{i}\n")).collect();
    (&s).write_all(batch.as_bytes()).unwrap();
    for i in 0..200 {
        assert_eq!(read_line(&mut r), format!("m{i}\n"));
    }
    // A last line without its newline is a message when the peer closes.
    (&s).write_all(b"last").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_line(&mut r), "last\n");
    assert_eq!(read_line(&mut r), "", "closed after the last answer");
}

#[test]
fn tcp_length_framing_round_trips_binary_messages() {
    let port = free_port();
    let core = core_with("tcp", port, "framing = \"length\"", None);
    let mut s = connect(&core, port);
    let bodies: Vec<Vec<u8>> = vec![b"one".to_vec(), b"\n\0\r\nbinary".to_vec(), vec![0xff; 60_000]];
    let mut out = Vec::new();
    for b in &bodies {
        out.extend_from_slice(&framed(b));
    }
    s.write_all(&out).unwrap();
    for b in &bodies {
        assert_eq!(&read_framed(&mut s), b);
    }
}

#[test]
fn tcp_serves_many_connections_at_once() {
    let port = free_port();
    let core = core_with("tcp", port, "", None);
    connect(&core, port);
    let clients: Vec<_> = (0..40)
        .map(|c| {
            std::thread::spawn(move || {
                let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(WAIT)).unwrap();
                let mut r = lines(&s);
                for i in 0..50 {
                    (&s).write_all(format!("c{c} m{i}\n").as_bytes()).unwrap();
                    assert_eq!(read_line(&mut r), format!("c{c} m{i}\n"));
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn tcp_bad_input_gets_an_error_then_a_close_and_others_are_served() {
    let port = free_port();
    let core = core_with("tcp", port, "max_message = 16", None);
    let good = connect(&core, port);
    let mut good_r = lines(&good);
    // A line over max_message, after a good one: the good one is answered.
    let mut s = connect(&core, port);
    s.write_all(b"fine\n0123456789abcdefXYZ\nnever\n").unwrap();
    let got = read_to_close(&mut s, WAIT);
    assert_eq!(String::from_utf8_lossy(&got), "fine\nerror: message over max_message (16 bytes)\n");
    // Refused before its end arrives: no newline ever comes.
    let mut s = connect(&core, port);
    s.write_all(&[b'x'; 100]).unwrap();
    let got = read_to_close(&mut s, WAIT);
    assert_eq!(String::from_utf8_lossy(&got), "error: message over max_message (16 bytes)\n");
    (&good).write_all(b"still here\n").unwrap();
    assert_eq!(read_line(&mut good_r), "still here\n");

    let port = free_port();
    let core = core_with("tcp", port, "max_message = 16, framing = \"length\"", None);
    for (input, reason) in [
        (vec![0, 0, 0, 0], "error: zero-length message"),
        (17u32.to_be_bytes().to_vec(), "error: message over max_message (16 bytes)"),
        (vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3], "error: message over max_message (16 bytes)"),
    ] {
        let mut s = connect(&core, port);
        s.write_all(&input).unwrap();
        let got = read_to_close(&mut s, WAIT);
        assert_eq!(got, framed(reason.as_bytes()), "{input:?}");
    }
    // A message cut short by the close.
    let mut s = connect(&core, port);
    s.write_all(&[0, 0, 0, 9, b'a']).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_close(&mut s, WAIT), framed(b"error: connection closed inside a message"));
}

#[test]
fn tcp_a_slow_partial_message_is_closed_by_the_idle_timeout_while_others_are_served() {
    let port = free_port();
    let core = core_with("tcp", port, "idle_timeout_ms = 600", None);
    let mut slow = connect(&core, port);
    let good = connect(&core, port);
    let mut good_r = lines(&good);
    let start = Instant::now();
    let mut closed = false;
    // One byte every 100 ms, never a newline: bytes alone keep no
    // connection open. Meanwhile the other connection is served.
    for i in 0..40 {
        if slow.write_all(b"x").is_err() {
            closed = true;
            break;
        }
        (&good).write_all(format!("ping {i}\n").as_bytes()).unwrap();
        assert_eq!(read_line(&mut good_r), format!("ping {i}\n"));
        std::thread::sleep(ms(100));
        slow.set_nonblocking(true).unwrap();
        let mut b = [0u8; 64];
        let r = slow.read(&mut b);
        slow.set_nonblocking(false).unwrap();
        if r.is_ok() {
            closed = true;
            break;
        }
    }
    assert!(closed, "the slow connection is still open after {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(3), "closed after {:?}", start.elapsed());
    // An idle connection with nothing sent is closed the same way, with a reason.
    let mut idle = connect(&core, port);
    assert_eq!(String::from_utf8_lossy(&read_to_close(&mut idle, WAIT)), "error: idle timeout\n");
}

#[test]
fn tcp_connections_over_the_limit_are_refused_with_a_reason() {
    let port = free_port();
    let admin = free_port();
    let core = core_with("tcp", port, "max_connections = 2", Some(admin));
    let a = connect(&core, port);
    let b = connect(&core, port);
    for s in [&a, &b] {
        let mut r = lines(s);
        (&*s).write_all(b"hi\n").unwrap();
        assert_eq!(read_line(&mut r), "hi\n");
    }
    let mut c = connect(&core, port);
    assert_eq!(String::from_utf8_lossy(&read_to_close(&mut c, WAIT)), "error: too many connections\n");
    drop(a);
    // Once one closes, a new connection is served.
    let deadline = Instant::now() + WAIT;
    loop {
        let d = connect(&core, port);
        let mut r = lines(&d);
        (&d).write_all(b"again\n").unwrap();
        let line = read_line(&mut r);
        if line == "again\n" {
            break;
        }
        assert_eq!(line, "error: too many connections\n");
        assert!(Instant::now() < deadline, "no room after a connection closed");
        std::thread::sleep(ms(50));
    }
    let metrics = admin_get(admin, "/metrics");
    for sample in [
        "cumulo_bridge_connections_refused_total{bridge=\"/bridge/tcp/\",protocol=\"tcp\",instance=\"0\"}",
        "cumulo_bridge_errors_total{bridge=\"/bridge/tcp/\",protocol=\"tcp\",instance=\"0\",kind=\"connection_limit\"}",
        "cumulo_bridge_messages_total{bridge=\"/bridge/tcp/\",protocol=\"tcp\",instance=\"0\"}",
    ] {
        assert!(metrics.contains(sample), "no {sample} in:\n{metrics}");
    }
    let text = admin_get(admin, "/v1/reports?kind=bridge");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let r = &v["reports"][0];
    assert_eq!((r["kind"].as_str(), r["id"].as_str()), (Some("bridge"), Some("/bridge/tcp/#0")), "{v}");
    let view = &r["view"];
    assert!(view["connections_refused"].as_u64() >= Some(1), "{v}");
    assert!(view["connections_accepted"].as_u64() >= Some(3) && view["messages"].as_u64() >= Some(3), "{v}");
    assert_eq!(view["errors"]["connection_limit"], view["connections_refused"], "{v}");
}

#[test]
fn tcp_a_failed_request_is_answered_with_its_status() {
    let port = free_port();
    let core = Core::start(
        Config::new().service(
            Service::internal("/bridge/tcp/", "tcp")
                .set("settings", format!("{{ port = {port}, dest = \"/nobody/here\" }}")),
        ),
    );
    let s = connect(&core, port);
    let mut r = lines(&s);
    (&s).write_all(b"anyone?\nstill?\n").unwrap();
    assert_eq!(read_line(&mut r), "error: NO_SERVICE\n");
    assert_eq!(read_line(&mut r), "error: NO_SERVICE\n", "the connection stays open");
}

#[test]
fn udp_datagrams_round_trip_and_an_oversized_one_is_refused() {
    let port = free_port();
    let core = core_with("udp", port, "max_message = 100", None);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(ms(200))).unwrap();
    let mut buf = [0u8; 2048];
    // The bridge binds after the core starts: ask until it answers.
    let deadline = Instant::now() + WAIT;
    loop {
        sock.send_to(b"ping", ("127.0.0.1", port)).unwrap();
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            assert_eq!(&buf[..n], b"ping");
            break;
        }
        assert!(Instant::now() < deadline, "the udp bridge did not answer; log:\n{}", core.log());
    }
    sock.set_read_timeout(Some(WAIT)).unwrap();
    for i in 0..50 {
        let m = format!("datagram {i}");
        sock.send_to(m.as_bytes(), ("127.0.0.1", port)).unwrap();
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from.port()), (m.as_bytes(), port));
    }
    sock.send_to(&[b'x'; 101], ("127.0.0.1", port)).unwrap();
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"error: message over max_message (100 bytes)");
    sock.send_to(&[b'y'; 100], ("127.0.0.1", port)).unwrap();
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], &[b'y'; 100]);
}

#[test]
fn tcp_answers_come_in_the_order_of_the_messages_whatever_order_they_are_answered_in() {
    let port = free_port();
    // Two processes, taken in turn: a slow message on one, the quick one
    // after it on the other, answered first.
    let core = Core::start(
        Config::new().service(ts!("/ts/").set("count_process", 2)).service(
            Service::internal("/bridge/tcp/", "tcp")
                .set("dest_refresh", q("round_robin"))
                .set("settings", format!("{{ port = {port}, dest = \"/ts/x\" }}")),
        ),
    );
    let s = connect(&core, port);
    let mut r = lines(&s);
    let start = Instant::now();
    (&s).write_all(b"sleep:300\nquick 1\nquick 2\n").unwrap();
    assert_eq!(read_line(&mut r), "sleep:300\n");
    assert!(start.elapsed() >= ms(250), "the slow one was answered after {:?}", start.elapsed());
    assert_eq!(read_line(&mut r), "quick 1\n");
    assert_eq!(read_line(&mut r), "quick 2\n");
}

#[test]
fn a_request_that_times_out_is_answered_timeout_and_udp_drops_past_max_in_flight() {
    let (tcp_port, udp_port, admin) = (free_port(), free_port(), free_port());
    let core = Core::start(
        Config::new()
            .admin("port", admin)
            .service(ts!("/hang/").mode("hang").set("count_process", 1))
            .service(
                Service::internal("/bridge/tcp/", "tcp")
                    .set("settings", format!("{{ port = {tcp_port}, dest = \"/hang/x\", timeout_ms = 300 }}")),
            )
            .service(Service::internal("/bridge/udp/", "udp").set(
                "settings",
                format!("{{ port = {udp_port}, dest = \"/hang/x\", timeout_ms = 1000, max_in_flight = 2 }}"),
            )),
    );
    let s = connect(&core, tcp_port);
    let mut r = lines(&s);
    let start = Instant::now();
    (&s).write_all(b"anyone?\n").unwrap();
    assert_eq!(read_line(&mut r), "error: TIMEOUT\n");
    assert!(start.elapsed() >= ms(250), "answered after {:?}", start.elapsed());

    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let deadline = Instant::now() + WAIT;
    // Bound by now? Two datagrams wait; the next three are dropped.
    while !admin_get(admin, "/metrics").contains("protocol=\"udp\"") {
        assert!(Instant::now() < deadline, "the udp bridge did not start; log:\n{}", core.log());
        std::thread::sleep(ms(50));
    }
    for i in 0..5 {
        sock.send_to(format!("d{i}").as_bytes(), ("127.0.0.1", udp_port)).unwrap();
    }
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 256];
    for _ in 0..2 {
        let (n, _) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"error: TIMEOUT");
    }
    sock.set_read_timeout(Some(ms(1500))).unwrap();
    assert!(sock.recv_from(&mut buf).is_err(), "only two datagrams were in flight");
    let metrics = admin_get(admin, "/metrics");
    let dropped = "cumulo_bridge_dropped_total{bridge=\"/bridge/udp/\",protocol=\"udp\",instance=\"0\"} 3";
    assert!(metrics.contains(dropped), "no {dropped} in:\n{metrics}");
}

#[test]
fn tcp_messages_in_flight_when_the_core_stops_are_answered_not_dropped() {
    let port = free_port();
    let mut core = Core::start(
        Config::new().service(ts!("/hang/").mode("hang").set("timeout_terminate", 500)).service(
            Service::internal("/bridge/tcp/", "tcp")
                .set("settings", format!("{{ port = {port}, dest = \"/hang/x\", timeout_ms = 30000 }}")),
        ),
    );
    let s = connect(&core, port);
    let mut r = lines(&s);
    (&s).write_all(b"one\ntwo\n").unwrap();
    std::thread::sleep(ms(300));
    core.signal(libc::SIGTERM);
    assert_eq!(read_line(&mut r), "error: SHUTTING_DOWN\n", "log:\n{}", core.log());
    assert_eq!(read_line(&mut r), "error: SHUTTING_DOWN\n");
    assert_eq!(read_line(&mut r), "", "then the close");
    assert!(core.wait_exit(WAIT).is_some(), "the core did not exit");
}

#[test]
fn tcp_messages_in_flight_when_the_bridge_restarts_are_answered_and_it_listens_again() {
    let (port, admin) = (free_port(), free_port());
    let core = Core::start(
        Config::new().admin("port", admin).service(ts!("/hang/").mode("hang")).service(
            Service::internal("/bridge/tcp/", "tcp")
                .set("settings", format!("{{ port = {port}, dest = \"/hang/x\", timeout_ms = 2000 }}")),
        ),
    );
    let s = connect(&core, port);
    let mut r = lines(&s);
    (&s).write_all(b"one\ntwo\n").unwrap();
    std::thread::sleep(ms(300));
    // The bridge is service 2; the core goes on running.
    core.admin_cmd(admin, &["services", "restart", "2"]);
    assert_eq!(read_line(&mut r), "error: SHUTTING_DOWN\n", "log:\n{}", core.log());
    assert_eq!(read_line(&mut r), "error: SHUTTING_DOWN\n");
    assert_eq!(read_line(&mut r), "", "then the close");
    let s = connect(&core, port);
    let mut r = lines(&s);
    (&s).write_all(b"again\n").unwrap();
    assert_eq!(read_line(&mut r), "error: TIMEOUT\n");
}

#[test]
fn tcp_requests_carry_the_peer_address_in_request_info() {
    use cumulo::{Answer, Request};
    use std::cell::RefCell;
    use std::rc::Rc;
    let port = free_port();
    let core = Core::start(Config::new().service(
        Service::internal("/bridge/tcp/", "tcp").set("settings", format!("{{ port = {port}, dest = \"/peer/x\" }}")),
    ));
    let mut api = core.client_with_prefix("/peer/");
    type Seen = (String, std::collections::HashMap<String, String>, Vec<u8>);
    let got: Rc<RefCell<Vec<Seen>>> = Rc::default();
    let g = got.clone();
    api.subscribe("*", move |_, req: &Request<'_>| {
        g.borrow_mut().push((req.name.to_string(), info(req.request_info), req.request.to_vec()));
        Ok(Answer::body(b"seen".to_vec()))
    })
    .unwrap();
    let s = connect(&core, port);
    let local = s.local_addr().unwrap().to_string();
    let peer = std::thread::spawn(move || {
        let mut r = lines(&s);
        (&s).write_all(b"who am i\n").unwrap();
        read_line(&mut r)
    });
    let deadline = Instant::now() + WAIT;
    while got.borrow().is_empty() {
        assert!(Instant::now() < deadline, "no request reached /peer/; log:\n{}", core.log());
        api.poll(Some(ms(50))).unwrap();
    }
    let (name, request_info, body) = got.borrow()[0].clone();
    assert_eq!((name.as_str(), body.as_slice()), ("/peer/x", &b"who am i"[..]));
    assert_eq!(request_info.get("remote_addr"), Some(&local), "{request_info:?}");
    // The answer is written once the client has sent it back.
    while !peer.is_finished() {
        api.poll(Some(ms(20))).unwrap();
    }
    assert_eq!(peer.join().unwrap(), "seen\n");
}

#[test]
fn udp_an_answer_too_long_for_a_datagram_is_an_error_datagram() {
    let port = free_port();
    let core = Core::start(Config::new().service(ts!("/ts/")).service(
        Service::internal("/bridge/udp/", "udp").set("settings", format!("{{ port = {port}, dest = \"/ts/x\" }}")),
    ));
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(ms(200))).unwrap();
    let mut buf = vec![0u8; 70_000];
    let deadline = Instant::now() + WAIT;
    loop {
        sock.send_to(b"big:65507", ("127.0.0.1", port)).unwrap();
        if let Ok((n, _)) = sock.recv_from(&mut buf) {
            assert_eq!(n, 65_507, "the largest datagram goes back whole");
            break;
        }
        assert!(Instant::now() < deadline, "the udp bridge did not answer; log:\n{}", core.log());
    }
    sock.set_read_timeout(Some(WAIT)).unwrap();
    sock.send_to(b"big:65508", ("127.0.0.1", port)).unwrap();
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"error: answer over a datagram's size");
}

#[test]
fn several_instances_of_a_bridge_share_its_address() {
    let (port, udp_port, admin) = (free_port(), free_port(), free_port());
    let core = Core::start(
        Config::new()
            .admin("port", admin)
            .service(Service::internal("/echo/", "echo").probe("/echo/x"))
            .service(
                Service::internal("/bridge/tcp/", "tcp")
                    .set("count_thread", 2)
                    .set("settings", format!("{{ port = {port}, dest = \"/echo/x\" }}")),
            )
            .service(
                Service::internal("/bridge/udp/", "udp")
                    .set("count_process", 2)
                    .set("settings", format!("{{ port = {udp_port}, dest = \"/echo/x\" }}")),
            ),
    );
    // Both instances bound (a second bind without SO_REUSEPORT would fail).
    let deadline = Instant::now() + WAIT;
    loop {
        let text = admin_get(admin, "/v1/reports?kind=bridge");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        if v["reports"].as_array().is_some_and(|r| r.len() == 4) {
            let mut ids: Vec<&str> =
                v["reports"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
            ids.sort();
            assert_eq!(ids, ["/bridge/tcp/#0", "/bridge/tcp/#1", "/bridge/udp/#0", "/bridge/udp/#1"]);
            break;
        }
        assert!(Instant::now() < deadline, "not every instance reported: {v}; log:\n{}", core.log());
        std::thread::sleep(ms(50));
    }
    assert!(
        core.lines_with(&["cannot listen"]).is_empty() && core.lines_with(&["cannot bind"]).is_empty(),
        "{}",
        core.log()
    );
    let mut open = Vec::new();
    for i in 0..20 {
        let s = connect(&core, port);
        let mut r = lines(&s);
        (&s).write_all(format!("c{i}\n").as_bytes()).unwrap();
        assert_eq!(read_line(&mut r), format!("c{i}\n"));
        open.push(s);
    }
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 64];
    sock.send_to(b"u", ("127.0.0.1", udp_port)).unwrap();
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"u");
}
