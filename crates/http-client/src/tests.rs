//! Reading requests and settings; the client against a tiny server on
//! loopback (end-to-end tests with nginx: tests/tests/services).

use crate::{Client, ErrorKind, Outgoing, Settings};
use cumulo_service::info;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn out(method: &str, pairs: &[(&str, &str)]) -> Result<Outgoing, crate::Error> {
    Outgoing::from_request(method, &info::encode(pairs), b"", 0)
}

#[test]
fn a_request_is_addressed_by_url_or_by_host_and_path() {
    let o = out("get", &[("url", "http://Example.org:8080/a/b?x=1")]).unwrap();
    assert_eq!((o.origin.https, o.origin.host.as_str(), o.origin.port), (false, "example.org", 8080));
    assert_eq!(o.target, "/a/b?x=1");
    let o = out("post", &[("host", "example.org"), ("path", "/p"), ("query", "q=2"), ("accept", "*/*")]).unwrap();
    assert_eq!((o.origin.https, o.origin.port, o.target.as_str()), (true, 443, "/p?q=2"));
    assert_eq!(o.method, hyper::Method::POST);
    let names: Vec<_> = o.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["accept"], "host, path and query address the request, they are not headers");
    let o = out("get", &[("scheme", "http"), ("host", "[::1]:81")]).unwrap();
    assert_eq!((o.origin.host.as_str(), o.origin.port, o.target.as_str()), ("[::1]", 81, "/"));
}

#[test]
fn hop_by_hop_headers_and_the_gateways_keys_are_not_sent() {
    let o = out(
        "get",
        &[
            ("url", "http://h/"),
            ("connection", "keep-alive, x-private"),
            ("x-private", "1"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("remote_addr", "1.2.3.4:5"),
            ("method", "GET"),
            ("x-kept", "a"),
            ("x-kept", "b"),
            ("host", "virtual.example"),
        ],
    )
    .unwrap();
    let names: Vec<_> = o.headers.iter().map(|(n, v)| format!("{n}={}", v.to_str().unwrap())).collect();
    assert_eq!(names, ["x-kept=a", "x-kept=b", "host=virtual.example"]);
}

#[test]
fn a_bad_request_says_what_is_wrong() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        ("get", &[], "neither 'url' nor 'host'"),
        ("get", &[("url", "ftp://h/")], "scheme 'ftp'"),
        ("get", &[("url", "h/x")], "bad URL"),
        ("get", &[("url", "http://user:pw@h/")], "credentials"),
        ("get", &[("host", "h"), ("path", "x")], "must start with '/'"),
        ("trace", &[("url", "http://h/")], "unknown method 'trace'"),
        ("get", &[("url", "http://h/"), ("bad header", "1")], "not a header name"),
        ("get", &[("url", "http://h/"), ("http_client_max_redirects", "99")], "0 ..= 20"),
    ];
    for (method, pairs, why) in cases {
        let e = out(method, pairs).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadRequest, "{pairs:?}");
        assert!(e.why().contains(why), "{pairs:?}: {e}");
    }
    let e = Outgoing::from_request("get", b"url\0", b"", 0).unwrap_err();
    assert!(e.why().contains("request_info"), "{e}");
}

#[test]
fn redirects_change_the_method_as_rfc_9110_says_and_keep_credentials_home() {
    let mut o =
        out("post", &[("url", "http://a/x/y"), ("authorization", "t"), ("content-type", "text/plain")]).unwrap();
    o.body = "b".into();
    let r = o.redirected(303, "z").unwrap();
    assert_eq!((r.method.as_str(), r.target.as_str(), r.body.len()), ("GET", "/x/z", 0));
    assert!(r.headers.iter().any(|(n, _)| n == "authorization"));
    assert!(!r.headers.iter().any(|(n, _)| n == "content-type"));
    let r = o.redirected(307, "https://b:444/w").unwrap();
    assert_eq!((r.method.as_str(), r.origin.host.as_str(), r.origin.port, r.body.len()), ("POST", "b", 444, 1));
    assert!(!r.headers.iter().any(|(n, _)| n == "authorization"), "not sent to another origin");
}

#[test]
fn settings_are_checked_with_their_field_and_reason() {
    let check = |s: &str| crate::check_settings(&toml::from_str(s).unwrap());
    assert!(check("").is_ok());
    assert!(check("max_connections = 4").is_ok(), "the defaults per host follow a smaller max_connections");
    let cases = [
        ("colour = 1", "http_client: colour: unknown setting"),
        ("max_response_bytes = 0", "http_client: max_response_bytes: must be an integer in 1"),
        ("max_connections = 2\nmax_idle_per_host = 3", "http_client: max_idle_per_host: 3 is over max_connections"),
        (
            "max_connections = 2\nmax_connections_per_host = 3",
            "http_client: max_connections_per_host: 3 is over max_connections (2)",
        ),
        (
            "max_connections_per_host = 4\nmax_idle_per_host = 5",
            "http_client: max_idle_per_host: 5 is over max_connections_per_host (4)",
        ),
        ("max_redirects = 21", "http_client: max_redirects"),
        ("ca_file = \"/nonexistent/ca.pem\"", "http_client: ca_file: '/nonexistent/ca.pem'"),
        ("system_roots = false", "http_client: system_roots: false needs a ca_file"),
        ("idle_timeout_ms = \"1\"", "http_client: idle_timeout_ms"),
    ];
    for (s, why) in cases {
        let e = check(s).unwrap_err();
        assert!(e.starts_with(why), "{s}: {e}");
    }
}

/// A server on loopback that answers every request on a connection with
/// `answer`, counting connections accepted; returns its port.
async fn server(answer: &'static [u8]) -> (u16, std::rc::Rc<std::cell::Cell<u32>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::rc::Rc::new(std::cell::Cell::new(0));
    let count = accepted.clone();
    tokio::task::spawn_local(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.set(count.get() + 1);
            tokio::task::spawn_local(async move {
                let mut buf = vec![0; 4096];
                let mut seen = Vec::new();
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if s.write_all(answer).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, accepted)
}

fn local<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(5)
}

#[test]
fn answers_come_back_whole_and_connections_are_reused() {
    local(async {
        let (port, accepted) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-a: 1\r\n\r\nhello").await;
        let client = Client::new(&Settings::default(), 1 << 20).unwrap();
        for _ in 0..20 {
            let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
            let a = client.send(o, soon()).await.unwrap();
            assert_eq!((a.status, a.body.as_slice()), (200, &b"hello"[..]));
            assert!(a.headers.contains(&("x-a".into(), b"1".to_vec())));
        }
        assert_eq!(accepted.get(), 1, "one keep-alive connection for requests one after another");
        assert_eq!(client.pool().idle_count(), 1);
    });
}

#[test]
fn failures_say_which_step_failed() {
    local(async {
        let client = Client::new(&Settings::default(), 16).unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let o = out("get", &[("url", &format!("http://127.0.0.1:{closed}/"))]).unwrap();
        assert_eq!(client.send(o, soon()).await.unwrap_err().kind(), ErrorKind::Connect);
        assert_eq!(client.pool().origins(), 0, "a failed connect leaves no entry for its origin");

        let (port, _) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n").await;
        let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
        let e = client.send(o, soon()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TooLarge, "{e}");

        let (port, _) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort").await;
        let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
        let roomy = Client::new(&Settings::default(), 1 << 20).unwrap();
        let e = roomy.send(o, deadline).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        assert!(e.why().contains("reading the answer's body"), "{e}");

        let (port, _) = server(b"NOT HTTP\r\n\r\n").await;
        let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
        assert_eq!(client.send(o, soon()).await.unwrap_err().kind(), ErrorKind::Protocol);
    });
}

#[test]
fn redirects_are_followed_only_when_asked_and_counted() {
    local(async {
        let (port, _) = server(b"HTTP/1.1 302 Found\r\nlocation: /again\r\ncontent-length: 0\r\n\r\n").await;
        let client = Client::new(&Settings::default(), 1 << 20).unwrap();
        let url = format!("http://127.0.0.1:{port}/");
        let a = client.send(out("get", &[("url", &url)]).unwrap(), soon()).await.unwrap();
        assert_eq!(a.status, 302, "not followed by default");
        let o = out("get", &[("url", &url), ("http_client_max_redirects", "3")]).unwrap();
        let e = client.send(o, soon()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Redirects, "{e}");
        assert_eq!(client.counters.redirects.get(), 3);
    });
}

#[test]
fn at_the_connection_limit_an_idle_connection_to_another_origin_makes_room() {
    local(async {
        let (a, accepted_a) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na").await;
        let (b, accepted_b) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb").await;
        let settings = Settings { max_connections: 1, ..Settings::default() };
        let client = Client::new(&settings, 1024).unwrap();
        for port in [a, b, a, a] {
            let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
            assert_eq!(client.send(o, soon()).await.unwrap().status, 200);
            assert_eq!(client.pool().open_count(), 1);
        }
        assert_eq!((accepted_a.get(), accepted_b.get()), (2, 1), "a's connection closed for b, then a new one kept");
        assert_eq!(client.pool().idle_by_origin(), [(format!("http://127.0.0.1:{a}"), 1)]);
    });
}

#[test]
fn one_origin_gets_at_most_max_connections_per_host() {
    local(async {
        let (port, accepted) = server(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na").await;
        let settings =
            Settings { max_connections: 8, max_connections_per_host: 2, max_idle_per_host: 2, ..Settings::default() };
        let client = std::rc::Rc::new(Client::new(&settings, 1024).unwrap());
        let sends: Vec<_> = (0..10)
            .map(|_| {
                let client = client.clone();
                let o = out("get", &[("url", &format!("http://127.0.0.1:{port}/"))]).unwrap();
                tokio::task::spawn_local(async move { client.send(o, soon()).await.map(|a| a.status) })
            })
            .collect();
        for send in sends {
            assert_eq!(send.await.unwrap().unwrap(), 200, "every request waited for a connection of its origin");
        }
        assert!(accepted.get() <= 2, "{} connections to one origin, at most 2 allowed", accepted.get());
        assert!(client.pool().open_count() <= 2);
    });
}
