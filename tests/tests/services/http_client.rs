//! `http_client` end to end: requests by name to nginx on loopback (plain
//! and HTTPS), and to servers written here that misbehave on purpose. Every
//! failure must come back as its own explicit answer (`status` 502/504 and
//! `http_client_error`) within the request's timeout.
//!
//! Needs `nginx` and `openssl` (scripts/setup.sh installs them).

use cumulo_e2e::*;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// nginx run by the test, in the foreground, on free ports of loopback:
/// static files over HTTP, and over HTTPS with a certificate of a CA the
/// test made.
struct Nginx {
    child: Child,
    port: u16,
    tls_port: u16,
    _dir: TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn nginx_bin() -> PathBuf {
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("nginx is not installed (scripts/setup.sh installs it)")
}

fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on port {port}");
        std::thread::sleep(ms(20));
    }
}

/// A CA, and a certificate it signed for `localhost` and 127.0.0.1:
/// (ca.pem, server.pem, server.key) in `dir`.
fn make_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=cumulo test CA"],
    ]
    .concat());
    run(&[&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]].concat());
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    (dir.join("ca.pem"), dir.join("server.pem"), dir.join("server.key"))
}

impl Nginx {
    fn start() -> (Nginx, PathBuf) {
        let dir = TempDir::new();
        let d = dir.0.clone();
        let (ca, cert, key) = make_certificates(&d);
        std::fs::create_dir_all(d.join("www")).unwrap();
        std::fs::write(d.join("www/hello.txt"), "hello from nginx\n").unwrap();
        let (port, tls_port) = (free_port(), free_port());
        let conf = format!(
            r#"daemon off;
master_process off;
error_log {d}/error.log warn;
pid {d}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    keepalive_requests 10000;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{tls_port} ssl;
        listen 127.0.0.2:{tls_port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {d}/www;
        # which connection served the request: reuse is counted by these
        add_header x-connection $connection always;
        location = /who {{ return 200 "$request_method $request_uri x-test=$http_x_test host=$host\n"; }}
        location = /created {{ return 201 "made\n"; }}
        location = /moved {{ return 302 /hello.txt; }}
    }}
}}
"#,
            d = d.display(),
            cert = cert.display(),
            key = key.display(),
        );
        std::fs::write(d.join("nginx.conf"), conf).unwrap();
        let child = Command::new(nginx_bin())
            .args(["-p", d.to_str().unwrap(), "-c", d.join("nginx.conf").to_str().unwrap(), "-e"])
            .arg(d.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        wait_listening(port, "nginx");
        wait_listening(tls_port, "nginx (TLS)");
        (Nginx { child, port, tls_port, _dir: dir }, ca)
    }
}

/// What a misbehaving server does once it accepted a connection.
#[derive(Clone, Copy)]
enum Misbehave {
    /// Answers the status line, then one header byte every 200 ms.
    SlowHeaders,
    /// Reads the request and never answers.
    Silent,
    /// Closes the connection without answering.
    CloseAtOnce,
    /// A chunked body of 1 GiB, written as it goes (never held).
    Gigabyte,
    /// Declares 1 GiB in Content-Length, and sends nothing of it.
    DeclaredGigabyte,
    /// Half of a 1 MB body, then a TCP reset.
    ResetMidBody,
}

/// A server on loopback doing `how` to every connection: its port, and the
/// bytes it managed to write (all connections together).
fn misbehaving(how: Misbehave) -> (u16, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let written = Arc::new(AtomicU64::new(0));
    let w = written.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(s) = conn else { return };
            let w = w.clone();
            std::thread::spawn(move || serve_badly(s, how, &w));
        }
    });
    (port, written)
}

fn read_head(s: &TcpStream) {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
        if line == "\r\n" {
            return;
        }
        line.clear();
    }
}

fn serve_badly(mut s: TcpStream, how: Misbehave, written: &AtomicU64) {
    let send = |s: &mut TcpStream, b: &[u8]| -> bool {
        let ok = s.write_all(b).is_ok();
        if ok {
            written.fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        ok
    };
    match how {
        Misbehave::SlowHeaders => {
            read_head(&s);
            if !send(&mut s, b"HTTP/1.1 200 OK\r\n") {
                return;
            }
            for _ in 0..600 {
                std::thread::sleep(ms(200));
                if !send(&mut s, b"x") {
                    return;
                }
            }
        }
        Misbehave::Silent => {
            read_head(&s);
            let _ = s.read(&mut [0; 1]);
        }
        Misbehave::CloseAtOnce => read_head(&s),
        Misbehave::Gigabyte => {
            read_head(&s);
            if !send(&mut s, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n") {
                return;
            }
            let chunk = [b'x'; 65536];
            let head = format!("{:x}\r\n", chunk.len());
            for _ in 0..(1 << 30) / chunk.len() {
                if !(send(&mut s, head.as_bytes()) && send(&mut s, &chunk) && send(&mut s, b"\r\n")) {
                    return;
                }
            }
            send(&mut s, b"0\r\n\r\n");
        }
        Misbehave::DeclaredGigabyte => {
            read_head(&s);
            send(&mut s, format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 1u64 << 30).as_bytes());
            let _ = s.read(&mut [0; 1]);
        }
        Misbehave::ResetMidBody => {
            // The request is left unread: closing a socket with unread
            // bytes makes the kernel send a reset, not a FIN.
            std::thread::sleep(ms(100));
            send(&mut s, b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n");
            send(&mut s, &[b'x'; 500_000]);
            std::thread::sleep(ms(300));
        }
    }
}

/// An `http_client` service at `prefix` with these settings.
fn http_client(prefix: &str, settings: &[(&str, String)]) -> Service {
    let pairs: Vec<String> = settings.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    Service::internal(prefix, "http_client").set("settings", format!("{{ {} }}", pairs.join(", ")))
}

/// Sends `method` through the service at `prefix` with these request_info
/// pairs; the answer's response_info, body and how long it took.
fn call(
    api: &mut Api,
    name: &str,
    pairs: &[(&str, &str)],
    body: &[u8],
    timeout_ms: u32,
) -> (HashMap<String, String>, Vec<u8>, Duration) {
    let start = Instant::now();
    let r = api
        .send_sync(name, &cumulo::info::encode(pairs), body, opts(timeout_ms))
        .unwrap_or_else(|e| panic!("{name} {pairs:?}: not an answer but {e}"));
    (info(&r.info), r.body, start.elapsed())
}

fn expect_failure(api: &mut Api, url: &str, timeout_ms: u32, status: &str, kind: &str) -> (String, Duration) {
    let (i, body, took) = call(api, "/http/get", &[("url", url)], b"", timeout_ms);
    let text = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(i.get("http_client_error").map(String::as_str), Some(kind), "{url}: {i:?} {text}");
    assert_eq!(i["status"], status, "{url}: {text}");
    assert!(took < ms(timeout_ms as u64), "{url}: answered after {took:?}, past its timeout");
    (text, took)
}

#[test]
fn http_client_sends_to_nginx_and_reuses_its_connections() {
    let (nginx, _) = Nginx::start();
    let admin = free_port();
    let core = Core::start(
        Config::new()
            .admin("port", admin)
            .service(http_client("/http/", &[]).probe("/http/get"))
            .service(http_client("/http4/", &[("max_connections", "4".into())]).probe("/http4/get")),
    );
    let mut api = core.client();
    let base = format!("http://127.0.0.1:{}", nginx.port);

    // status, headers and body of the answer; the caller's headers sent
    let (i, body, _) = call(&mut api, "/http/get", &[("url", &format!("{base}/who?a=1")), ("x-test", "42")], b"", 5000);
    assert_eq!(i["status"], "200");
    assert_eq!(String::from_utf8_lossy(&body), "GET /who?a=1 x-test=42 host=127.0.0.1\n");
    assert!(i.contains_key("x-connection") && i.contains_key("server"), "{i:?}");
    assert!(!i.contains_key("connection"), "hop-by-hop headers are not passed back: {i:?}");
    // host + path + query, scheme given
    let host = format!("127.0.0.1:{}", nginx.port);
    let pairs = [("scheme", "http"), ("host", host.as_str()), ("path", "/hello.txt")];
    let (i, body, _) = call(&mut api, "/http/get", &pairs, b"", 5000);
    assert_eq!((i["status"].as_str(), body.as_slice()), ("200", &b"hello from nginx\n"[..]));
    assert_eq!(i["content-length"], "17");
    // other methods, other statuses
    let (i, body, _) = call(&mut api, "/http/post", &[("url", &format!("{base}/created"))], b"data", 5000);
    assert_eq!((i["status"].as_str(), body.as_slice()), ("201", &b"made\n"[..]));
    let (i, body, _) = call(&mut api, "/http/head", &[("url", &format!("{base}/hello.txt"))], b"", 5000);
    assert_eq!((i["status"].as_str(), body.len()), ("200", 0));
    let (i, _, _) = call(&mut api, "/http/get", &[("url", &format!("{base}/nosuch"))], b"", 5000);
    assert_eq!(i["status"], "404");
    assert!(!i.contains_key("http_client_error"), "a 404 is the server's answer, not a failure");
    // redirects: passed back unless asked for
    let (i, _, _) = call(&mut api, "/http/get", &[("url", &format!("{base}/moved"))], b"", 5000);
    assert_eq!(i["status"], "302");
    let asked = [("url", format!("{base}/moved")), ("http_client_max_redirects", "2".into())];
    let asked: Vec<(&str, &str)> = asked.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (i, body, _) = call(&mut api, "/http/get", &asked, b"", 5000);
    assert_eq!((i["status"].as_str(), body.as_slice()), ("200", &b"hello from nginx\n"[..]));

    // 50 requests one after another: one connection, kept alive
    let mut seen = BTreeSet::new();
    for _ in 0..50 {
        let (i, _, _) = call(&mut api, "/http/get", &[("url", &format!("{base}/hello.txt"))], b"", 5000);
        assert_eq!(i["status"], "200");
        seen.insert(i["x-connection"].clone());
    }
    assert_eq!(seen.len(), 1, "50 requests in turn used connections {seen:?}");

    // 50 at once through a service of 4 connections: at most 4 opened
    let url = format!("{base}/hello.txt");
    let info = cumulo::info::encode(&[("url", url.as_str())]);
    let tids: Vec<_> = (0..50).map(|_| api.send_async("/http4/get", &info, b"", opts(10_000))).collect();
    let mut seen = BTreeSet::new();
    for _ in &tids {
        let (_, r) = api.recv_async(None, ms(10_000)).unwrap().expect("an answer");
        let i = cumulo_e2e::info(&r.unwrap().info);
        assert_eq!(i["status"], "200");
        seen.insert(i["x-connection"].clone());
    }
    assert!(seen.len() <= 4, "50 requests at once with max_connections = 4 used connections {seen:?}");

    // what operators see: the admin API's view and /metrics
    let v: serde_json::Value = serde_json::from_str(&admin_get(admin, "/v1/http-clients")).unwrap();
    let view = v["http_clients"].as_array().unwrap().iter().find(|c| c["prefix"] == "/http4/").unwrap().clone();
    assert_eq!(view["answered"]["2xx"], 50, "{view}");
    assert!(view["connections_opened"].as_u64().unwrap() <= 4, "{view}");
    assert!(view["connections_idle"].as_u64().unwrap() >= 1, "{view}");
    let metrics = admin_get(admin, "/metrics");
    let line = r#"cumulo_http_client_failures_total{service="/http/",process="0",error="bad_request"}"#;
    assert!(metrics.contains(&format!("{line} 1")), "the probe's request without a URL is counted: {metrics}");
    assert!(metrics.contains("cumulo_http_client_connections_open{"), "{metrics}");
}

/// The body of `GET path` on the admin API.
fn admin_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(ms(5000))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let end = text.find("\r\n\r\n").expect("a response head");
    text[end + 4..].to_string()
}

#[test]
fn http_client_verifies_certificates_against_the_system_or_its_ca_file() {
    let (nginx, ca) = Nginx::start();
    let core = Core::start(
        Config::new()
            .service(http_client("/http/", &[]).probe("/http/get"))
            .service(http_client("/https_ca/", &[("ca_file", q(ca.to_str().unwrap()))]).probe("/https_ca/get")),
    );
    let mut api = core.client();
    let url = format!("https://localhost:{}/hello.txt", nginx.tls_port);
    // signed by a CA the system does not know
    let (text, _) = expect_failure(&mut api, &url, 5000, "502", "tls");
    assert!(text.contains("certificate"), "{text}");
    // the same with that CA configured
    let (i, body, _) = call(&mut api, "/https_ca/get", &[("url", &url)], b"", 5000);
    assert_eq!((i["status"].as_str(), body.as_slice()), ("200", &b"hello from nginx\n"[..]), "{i:?}");
    // https is the default scheme of host + path
    let host = format!("localhost:{}", nginx.tls_port);
    let (i, _, _) = call(&mut api, "/https_ca/get", &[("host", host.as_str()), ("path", "/hello.txt")], b"", 5000);
    assert_eq!(i["status"], "200");
    // the certificate names localhost and 127.0.0.1, not 127.0.0.2
    let other = format!("https://127.0.0.2:{}/hello.txt", nginx.tls_port);
    let (i, body, _) = call(&mut api, "/https_ca/get", &[("url", &other)], b"", 5000);
    assert_eq!(i.get("http_client_error").map(String::as_str), Some("tls"), "{}", String::from_utf8_lossy(&body));
}

#[test]
fn http_client_answers_every_failure_explicitly_within_the_timeout() {
    let core = Core::start(Config::new().service(http_client("/http/", &[]).probe("/http/get")));
    let mut api = core.client();

    let (port, _) = misbehaving(Misbehave::SlowHeaders);
    let (text, took) = expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 1500, "504", "timeout");
    assert!(text.contains("waiting for the answer's head"), "{text}");
    assert!(took > ms(1000), "the deadline is the request's own ({took:?})");

    let (port, _) = misbehaving(Misbehave::Silent);
    expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 1000, "504", "timeout");

    let (port, _) = misbehaving(Misbehave::CloseAtOnce);
    expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 5000, "502", "reset");

    let (port, written) = misbehaving(Misbehave::Gigabyte);
    let (text, _) = expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 10_000, "502", "too_large");
    assert!(text.contains("4194304"), "the default max_response_bytes: {text}");
    std::thread::sleep(ms(300));
    let sent = written.load(Ordering::Relaxed);
    assert!(sent < 64 << 20, "the connection is closed once over the limit: {sent} bytes were written");

    let (port, _) = misbehaving(Misbehave::DeclaredGigabyte);
    let (_, took) = expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 10_000, "502", "too_large");
    assert!(took < ms(2000), "refused from its Content-Length, at once ({took:?})");

    let (port, _) = misbehaving(Misbehave::ResetMidBody);
    let (text, _) = expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 5000, "502", "reset");
    assert!(text.contains("reset") || text.contains("closed"), "{text}");

    let closed = free_port();
    let (text, _) = expect_failure(&mut api, &format!("http://127.0.0.1:{closed}/"), 5000, "502", "connect");
    assert!(text.contains("refused"), "{text}");

    let (text, _) = expect_failure(&mut api, "http://nosuch.invalid/", 5000, "502", "dns");
    assert!(text.contains("nosuch.invalid"), "{text}");

    for (pairs, why) in [
        (vec![("url", "ftp://example.org/")], "scheme 'ftp'"),
        (vec![("path", "/x")], "neither 'url' nor 'host'"),
        (vec![("url", "http://example.org/"), ("x-bad", "a\u{1}b")], "not a valid header value"),
    ] {
        let (i, body, _) = call(&mut api, "/http/get", &pairs, b"", 5000);
        let text = String::from_utf8_lossy(&body);
        assert_eq!((i["status"].as_str(), i["http_client_error"].as_str()), ("400", "bad_request"), "{pairs:?}");
        assert!(text.contains(why), "{pairs:?}: {text}");
    }
    // the service still serves after all that
    let (port, _) = misbehaving(Misbehave::Silent);
    expect_failure(&mut api, &format!("http://127.0.0.1:{port}/"), 300, "504", "timeout");
}
