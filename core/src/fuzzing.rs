//! Entry points for the fuzz targets in `fuzz/` and their regression tests:
//! the core as an SDK instance or an HTTP client reaches it, driven over
//! in-memory streams instead of sockets, so a fuzzer runs thousands of
//! sessions a second and a crash reproduces without a network.
//!
//! A session runs inside a `LocalSet` on a current-thread runtime, best with
//! a paused clock (`start_paused`): timeouts then fire as soon as nothing
//! else can run, so a session never waits in real time. [`run`] sets that up.

use crate::internal::InternalApi;
use cumulo_config::ServiceOptions;
use cumulo_router::{Core, Limits, Shared};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use crate::internal::http;

/// The filesystem service's parsers of names and `Range` headers.
pub mod filesystem {
    pub use cumulo_filesystem::{path, range};
}

/// How long an HTTP session may last (in the paused clock) before it counts
/// as a connection the gateway never ends.
pub const HTTP_SESSION_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Limits small enough that a fuzzer reaches them.
pub use cumulo_node::test_util::{run, run_unpaused, small_limits};

/// A fresh core with its timer loop and the internal `echo` service
/// subscribed under `/echo/`. Call inside a `LocalSet`.
pub async fn start_core(limits: Limits) -> Shared {
    let core = Rc::new(RefCell::new(Core::new(limits, ServiceOptions::default())));
    tokio::task::spawn_local(cumulo_node::runtime::timer_loop(core.clone()));
    let echo = crate::internal::create("echo", &toml::Table::new()).expect("echo takes empty settings");
    let api = InternalApi::connect(&core, "/echo/", Rc::default(), Rc::default(), 0, 0, 1, 1).expect("echo instance");
    tokio::task::spawn_local(echo.run(api));
    while core.borrow_mut().registry_mut().lookup("/echo/x").is_none() {
        tokio::task::yield_now().await;
    }
    core
}

/// `count` fresh shards of one core, linked as the daemon links them
/// (src/shards), each with its timer loop; the internal `echo` service is on
/// shard 0 and known to every shard. Call inside a `LocalSet`.
pub async fn start_shards(limits: Limits, count: u32) -> Vec<Shared> {
    let mut cores = Vec::new();
    for ends in cumulo_node::shards::channels(count) {
        let core = Rc::new(RefCell::new(Core::new(limits.clone(), ServiceOptions::default())));
        cumulo_node::shards::attach(&core, ends);
        tokio::task::spawn_local(cumulo_node::runtime::timer_loop(core.clone()));
        cores.push(core);
    }
    let echo = crate::internal::create("echo", &toml::Table::new()).expect("echo takes empty settings");
    let api =
        InternalApi::connect(&cores[0], "/echo/", Rc::default(), Rc::default(), 0, 0, 1, 1).expect("echo instance");
    tokio::task::spawn_local(echo.run(api));
    while cores.iter().any(|c| c.borrow_mut().registry_mut().lookup("/echo/x").is_none()) {
        tokio::task::yield_now().await;
    }
    cores
}

/// One instance connection: the peer writes `input` in pieces of `chunk`
/// bytes (so frames arrive split across reads), waits `linger` (answers,
/// timeouts), then closes its side. Returns what the core wrote back.
pub async fn socket_session(core: &Shared, input: &[u8], chunk: usize, linger: Duration) -> Vec<u8> {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (srd, swr) = tokio::io::split(server);
    let served = tokio::task::spawn_local(cumulo_node::listener::connection(core.clone(), srd, swr));
    let (mut rd, mut wr) = tokio::io::split(client);
    let write = async move {
        for piece in input.chunks(chunk.max(1)) {
            if wr.write_all(piece).await.is_err() {
                return; // the core closed the connection
            }
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(linger).await;
        let _ = wr.shutdown().await;
    };
    let mut out = Vec::new();
    let _ = tokio::join!(write, rd.read_to_end(&mut out));
    let _ = served.await;
    out
}

/// One HTTP connection to a gateway with `settings`, in front of `core`:
/// the client writes `input` in pieces of `chunk` bytes and then only
/// reads, never closing its side, so the gateway must end the connection
/// itself (answer and close, or its header/body timeouts). Returns what
/// the gateway wrote, or `Err` if the connection was still open after
/// [`HTTP_SESSION_LIMIT`].
pub async fn http_session(
    core: &Shared,
    settings: &toml::Table,
    input: &[u8],
    chunk: usize,
) -> Result<Vec<u8>, Vec<u8>> {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (core2, settings) = (core.clone(), settings.clone());
    let served = tokio::task::spawn_local(async move { http::serve_connection(&core2, &settings, server).await });
    let (mut rd, mut wr) = tokio::io::split(client);
    let write = async move {
        for piece in input.chunks(chunk.max(1)) {
            if wr.write_all(piece).await.is_err() {
                return wr; // the gateway closed the connection
            }
            tokio::task::yield_now().await;
        }
        wr // held open until the gateway is done
    };
    let mut out = Vec::new();
    let ended = tokio::time::timeout(HTTP_SESSION_LIMIT, async {
        let (_open, _) = tokio::join!(write, rd.read_to_end(&mut out));
    })
    .await;
    served.abort();
    match ended {
        Ok(()) => Ok(out),
        Err(_) => Err(out),
    }
}

/// The gateway's checks of what it wrote on a WebSocket (fuzz targets).
pub use cumulo_gateway::fuzzing::{server_frames as websocket_server_frames, websocket_protocol_answer};

#[cfg(test)]
mod tests {
    use super::*;
    use cumulo_proto::{decode, next_frame_len, Frame, Status, TransId, LEN_PREFIX};

    fn frames(mut out: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut v = Vec::new();
        while let Some(n) = next_frame_len(out, u32::MAX).unwrap() {
            v.push((out[LEN_PREFIX], out[LEN_PREFIX..n].to_vec()));
            out = &out[n..];
        }
        assert!(out.is_empty(), "a partial frame at the end");
        v
    }

    #[test]
    fn a_socket_session_is_welcomed_and_echoed() {
        let out = run(async {
            let core = start_core(small_limits()).await;
            let mut input = Vec::new();
            cumulo_proto::encode_hello(
                &mut input,
                &cumulo_proto::Hello { version: 1, window: 1, thread_index: 0, token: "", prefix: "/raw/" },
            );
            // The first unmanaged instance after echo is instance 2.
            let tid = TransId::new(1, 1, 2);
            let send = cumulo_proto::Send {
                trans_id: tid,
                timeout: 1000,
                priority: 0,
                flags: 0,
                name: "/echo/x",
                request_info: b"",
                request: b"hi",
            };
            cumulo_proto::encode_send(&mut input, cumulo_proto::kind::SEND_SYNC, &send);
            socket_session(&core, &input, 3, Duration::from_millis(100)).await
        });
        let f = frames(&out);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(matches!(decode(&f[0].1), Ok(Frame::Welcome(w)) if w.instance_id == 2));
        match decode(&f[1].1) {
            Ok(Frame::Response(r)) => assert_eq!((r.status, r.response), (Status::Ok.code(), &b"hi"[..])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_on_a_socket_gets_an_error_frame() {
        let out = run(async {
            let core = start_core(small_limits()).await;
            socket_session(&core, b"GET / HTTP/1.1\r\n\r\n", 1, Duration::ZERO).await
        });
        let f = frames(&out);
        assert!(matches!(decode(&f[0].1), Ok(Frame::Error(e)) if e.status == Status::TooLarge.code()), "{f:?}");
    }

    fn http(input: &[u8]) -> String {
        let out = run(async {
            let core = start_core(small_limits()).await;
            http_session(&core, &toml::Table::new(), input, 7).await.expect("the gateway ends the connection")
        });
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn an_http_session_is_answered_then_closed_by_the_gateway() {
        let out = http(b"POST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\n\r\nhi");
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(out.ends_with("hi"), "{out}");
    }

    #[test]
    fn a_body_that_never_comes_is_408() {
        let out = http(b"POST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 10\r\n\r\nabc");
        assert!(out.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{out}");
        assert!(out.contains("body_timeout_ms"), "{out}");
    }

    #[test]
    fn request_and_response_mapping() {
        let m = http::map_request(&toml::Table::new(), b"GET", b"/a/b?x=1", &[(b"X-A", b"1")]).unwrap();
        assert_eq!(m.name, "/a/b/get");
        assert_eq!(m.query_request.unwrap().unwrap(), b"x\x001\x00");
        assert_eq!(cumulo_proto::info::get(&m.request_info, b"x-a"), Some(&b"1"[..]));
        let (status, headers) = http::map_response(0, b"status\x00201\x00x-b\x002\x00", b"");
        assert_eq!((status, headers), (201, vec![("x-b".to_string(), b"2".to_vec())]));
    }
}

/// The router's timer table, through the whole core.
#[cfg(test)]
mod timers {
    use cumulo_proto::TransId;
    use cumulo_router::TIMER_SLACK as SLACK;
    use std::time::Duration;

    /// Through the core: 20,000 answered requests leave at most
    /// `2 x in flight + SLACK` entries behind (the sweep runs), and a
    /// request after them still times out.
    #[test]
    fn answered_requests_leave_a_bounded_table_behind() {
        use super::{run, small_limits, socket_session, start_core};
        use cumulo_proto::{kind, Send};
        let (left, in_flight, timeouts) = run(async {
            let core = start_core(small_limits()).await;
            let mut input = Vec::new();
            let hello = cumulo_proto::Hello { version: 1, window: 1, thread_index: 0, token: "", prefix: "/t/" };
            cumulo_proto::encode_hello(&mut input, &hello);
            let frame = |input: &mut Vec<u8>, n: u64, name: &str, timeout: u32, flags: u8| {
                let trans_id = TransId::new(n, 1, 2);
                let s = Send { trans_id, timeout, priority: 0, flags, name, request_info: b"", request: b"x" };
                cumulo_proto::encode_send(input, kind::SEND_ASYNC, &s);
            };
            for n in 1..=20_000 {
                frame(&mut input, n, "/echo/x", 60_000, 0);
            }
            // Waits for a subscriber that never comes: times out at 500 ms.
            frame(&mut input, 20_001, "/nobody/x", 500, cumulo_proto::SEND_WAIT_FOR_SERVICE);
            let out = socket_session(&core, &input, 600, Duration::from_millis(800)).await;
            let c = core.borrow();
            (c.timers().len(), c.in_flight(), (c.stats().responses, c.stats().timeouts, out.len()))
        });
        let (answered, timed_out, _) = timeouts;
        assert!(answered >= 20_000, "every echo answered: {timeouts:?}");
        assert_eq!(timed_out, 1, "the waiting request timed out");
        assert!(left <= 2 * in_flight + SLACK, "{left} entries left for {in_flight} requests in flight");
    }
}
