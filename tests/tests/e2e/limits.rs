//! Limits under abuse: a client that stops reading (max_outbox), requests
//! waiting for a service that never comes (max_parked), frames over
//! max_frame refused by the Rust SDK before they reach the core, and a core
//! out of file descriptors (its accept loops back off, the connected clients
//! are still served, and new ones are once descriptors are free again).

use cumulo_e2e::raw::Raw;
use cumulo_e2e::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn echo() -> Service {
    Service::internal("/echo/", "echo").probe("/echo/x")
}

fn served_in_time(api: &mut Api, body: &str) {
    let t = Instant::now();
    let r = api.send_sync("/echo/x", b"", body.as_bytes(), opts(5000));
    assert_eq!(r.unwrap().body, body.as_bytes());
    assert!(t.elapsed() < Duration::from_secs(2), "answered after {:?}", t.elapsed());
}

#[test]
fn the_rust_sdk_refuses_frames_over_max_frame_and_both_ends_keep_serving() {
    let core = Core::start(Config::new().core("max_frame", 1024).service(ts!("/echo/").set("count_thread", 1)));
    let mut api = core.client();
    let instance = |api: &mut Api| {
        let r = api.send_sync("/echo/small", b"", b"small", opts(5000));
        field(&r.unwrap(), "instance")
    };
    let before = instance(&mut api);
    let big = vec![b'x'; 2000];
    let r = api.send_sync("/echo/big", b"", &big, opts(5000));
    assert_eq!(status(&r), Status::TooLarge, "{:?}", r.err());
    let tid = api.send_async("/echo/big", b"", &big, opts(5000));
    let (got, r) = api
        .recv_async(Some(tid), Duration::from_millis(100))
        .unwrap()
        .expect("an oversized send_async is answered at once");
    assert_eq!(got, tid);
    assert_eq!(status(&r), Status::TooLarge);
    // The request fits; its echo (the body plus the service's
    // response_info) does not: the service answers TOO_LARGE instead.
    let r = api.send_sync("/echo/fits", b"", &[b'y'; 900], opts(5000));
    assert_eq!(status(&r), Status::TooLarge, "{:?}", r.err());
    assert_eq!(instance(&mut api), before, "the service instance kept its connection (no restart)");
}

#[test]
fn a_client_that_stops_reading_is_cut_off_at_max_outbox() {
    let core = Core::start(Config::new().core("max_frame", 65536).core("max_outbox", 262_144).service(echo()));
    let mut slow = Raw::connect(&core.socket);
    slow.handshake(1024, "/slow/");
    assert_eq!(slow.subscribe(1, "x"), 0);
    // From here on `slow` reads nothing.
    let mut sender = core.client();
    let mut other = core.client();
    let body = vec![b'z'; 32 * 1024];
    let tids: Vec<_> = (0..100).map(|_| sender.send_async("/slow/x", b"", &body, opts(20_000))).collect();
    sender.flush().unwrap();
    core.wait_lines(&["slow consumer", "262144"], 1, Duration::from_secs(10));
    served_in_time(&mut other, "meanwhile");
    // Every request ends at once: CRASHED if it reached the slow client,
    // NO_SERVICE if it came after the core dropped it; none waits 20 s.
    let t = Instant::now();
    let mut crashed = 0;
    for tid in tids {
        let (_, r) = sender.recv_async(Some(tid), Duration::from_secs(5)).unwrap().expect("an answer");
        match status(&r) {
            Status::Crashed => crashed += 1,
            Status::NoService => {}
            s => panic!("unexpected {s:?}"),
        }
    }
    assert!(crashed > 0);
    assert!(t.elapsed() < Duration::from_secs(5));
    served_in_time(&mut other, "after");
}

#[test]
fn requests_waiting_for_a_service_are_capped_by_max_parked() {
    let core = Core::start(Config::new().core("max_parked", 3));
    let mut api = core.client();
    let wait = SendOptions { timeout: 800, wait_for_service: true, ..Default::default() };
    let parked: Vec<_> = (0..3).map(|_| api.send_async("/later/x", b"", b"", wait)).collect();
    let t = Instant::now();
    let r = api.send_sync("/later/x", b"", b"", wait);
    assert_eq!(status(&r), Status::QueueFull);
    assert!(format!("{}", r.unwrap_err()).contains("max_parked"));
    assert!(t.elapsed() < ms(500), "refused at once");
    for tid in parked {
        let (_, r) = api.recv_async(Some(tid), Duration::from_secs(5)).unwrap().expect("an answer");
        assert_eq!(status(&r), Status::Timeout);
    }
    // Their places are free again.
    let again = api.send_sync("/later/x", b"", b"", SendOptions { timeout: 100, ..wait });
    assert_eq!(status(&again), Status::Timeout);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One GET on a keep-alive connection: (status, body).
fn http_get(s: &mut TcpStream, path: &str) -> (u16, Vec<u8>) {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: t\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head[9..12].parse().unwrap();
            let len: usize =
                head.lines().find_map(|l| l.strip_prefix("content-length: ")).map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).unwrap();
                assert!(n > 0, "closed mid-body");
                buf.extend_from_slice(&chunk[..n]);
            }
            return (status, buf[end + 4..end + 4 + len].to_vec());
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before answering: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn out_of_file_descriptors_the_core_backs_off_and_recovers() {
    let port = free_port();
    let core = Core::start(
        Config::new()
            .open_files(40)
            .core("hello_timeout", 60_000)
            .service(echo())
            .service(Service::internal("/web/", "http").set("settings", format!("{{ port = {port} }}"))),
    );
    core.wait_lines(&["open files limit: 40"], 1, Duration::from_secs(5));
    core.wait_lines(&["below core.max_connections"], 1, Duration::from_secs(5));
    let mut api = core.client();
    let mut web = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(http_get(&mut web, "/echo/x?a=1").0, 200);

    // More connections than descriptors: the kernel queues those the core
    // cannot accept.
    let flood: Vec<Raw> = (0..60).map(|_| Raw::connect(&core.socket)).collect();
    let http_flood: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    core.wait_lines(&["accept failed"], 1, Duration::from_secs(10));
    // Connected clients are still served, over both listeners.
    for i in 0..10 {
        served_in_time(&mut api, &format!("at the limit {i}"));
        assert_eq!(http_get(&mut web, "/echo/x?b=2").0, 200);
    }
    // Backing off, not spinning: at most one failed accept per 100 ms and
    // listener (plus the gateway's, throttled to one line per 10 s).
    let before = core.lines_with(&["accept failed"]).len();
    std::thread::sleep(Duration::from_secs(1));
    let during = core.lines_with(&["accept failed"]).len() - before;
    assert!(during <= 15, "{during} accept failures logged in 1 s");

    drop(flood);
    drop(http_flood);
    // Descriptors come back as the core sees those connections close; a
    // new client is then accepted and served.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let fresh = Api::connect(Options::unmanaged(core.socket_str(), "/fresh/"));
        if let Ok(mut fresh) = fresh {
            served_in_time(&mut fresh, "a new client");
            break;
        }
        assert!(Instant::now() < deadline, "no new client accepted after the flood ended");
        std::thread::sleep(ms(100));
    }
    let mut new_web = TcpStream::connect(("127.0.0.1", port)).unwrap();
    assert_eq!(http_get(&mut new_web, "/echo/x?c=3").0, 200);
}
