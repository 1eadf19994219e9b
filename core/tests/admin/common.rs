//! Starts the real `cumulo` binary with a config of the test's own (socket,
//! admin port, services) in a temporary folder, and talks to it: over HTTP
//! to its admin API, and over its socket as an unmanaged SDK instance.
#![allow(dead_code, reason = "each test binary uses a different part of these helpers")]

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const CUMULO: &str = env!("CARGO_BIN_EXE_cumulo");

/// The Rust http_req example (subscribes rust.xml/get): built by `cargo
/// build --release`; built here into a folder of its own if it is missing.
pub fn http_req() -> PathBuf {
    let target = Path::new(CUMULO).parent().unwrap().to_path_buf();
    let built = target.join("http_req");
    if built.exists() {
        return built;
    }
    static BUILD: std::sync::Once = std::sync::Once::new();
    let own = target.parent().unwrap().join("e2e-http_req");
    BUILD.call_once(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--release", "-p", "http_req", "--target-dir"])
            .arg(&own)
            .current_dir(root)
            .status()
            .expect("run cargo to build http_req");
        assert!(ok.success(), "building http_req failed");
    });
    own.join("release").join("http_req")
}

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct TestCore {
    pub child: Child,
    pub dir: PathBuf,
    pub config: PathBuf,
    pub socket: PathBuf,
    pub port: u16,
    pub token: Option<String>,
    pub log: PathBuf,
}

pub struct Http {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Http {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl TestCore {
    /// A core with these `[[service]]` tables (TOML) and no admin token.
    pub fn start(services: &str) -> TestCore {
        TestCore::start_with(services, None)
    }

    pub fn start_with(services: &str, token: Option<&str>) -> TestCore {
        TestCore::start_keepalive(services, token, 1000)
    }

    /// A core whose keep-alive round is `keepalive_ms` (its pings and their
    /// answers are work the core does: a long round leaves it idle).
    pub fn start_keepalive(services: &str, token: Option<&str>, keepalive_ms: u32) -> TestCore {
        TestCore::start_full(services, token, keepalive_ms, &format!("threads = {}", test_threads()))
    }

    /// A core whose token is read from `file` (`[admin] token_file`);
    /// `token` is what the file holds, for the calls of the test.
    pub fn start_token_file(file: &Path, token: &str) -> TestCore {
        let admin = format!("token_file = {}", toml_str(file));
        TestCore::start_admin("", &admin, Some(token), 1000, &format!("threads = {}", test_threads()))
    }

    /// A core on `threads` threads (`core.threads`), whatever the suite's.
    pub fn start_threads(services: &str, threads: u32) -> TestCore {
        TestCore::start_full(services, None, 1000, &format!("threads = {threads}"))
    }

    /// On `threads` threads with the service connections handed to the
    /// shards (`core.spread_instances`).
    pub fn start_spread(services: &str, threads: u32) -> TestCore {
        TestCore::start_full(services, None, 1000, &format!("threads = {threads}\nspread_instances = true"))
    }

    /// `core_keys`: lines of the `[core]` section besides the socket and
    /// keep-alive (the threads).
    fn start_full(services: &str, token: Option<&str>, keepalive_ms: u32, core_keys: &str) -> TestCore {
        let token_line = token.map(|t| format!("token = \"{t}\"")).unwrap_or_default();
        TestCore::start_admin(services, &token_line, token, keepalive_ms, core_keys)
    }

    /// `admin_keys`: lines of the `[admin]` section besides the port;
    /// `token`: the token the test's calls carry.
    fn start_admin(
        services: &str,
        admin_keys: &str,
        token: Option<&str>,
        keepalive_ms: u32,
        core_keys: &str,
    ) -> TestCore {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("cumulo-e2e-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("cumulo.sock");
        // A freed port may be taken again before the core binds it: retry.
        for _ in 0..5 {
            let port = free_port();
            let text = format!(
                "[core]\nsocket = \"{}\"\nkeepalive = {keepalive_ms}\n{core_keys}\n\n[admin]\nport = {port}\n{admin_keys}\n\n{services}\n",
                socket.display(),
            );
            let config = dir.join("cumulo.toml");
            std::fs::write(&config, text).unwrap();
            let log = dir.join("core.log");
            let child = Command::new(CUMULO)
                .args(["--log-format", "json", "run", "--config"])
                .arg(&config)
                .env_remove("CUMULO_LOG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("start cumulo");
            let mut core = TestCore {
                child,
                dir: dir.clone(),
                config,
                socket: socket.clone(),
                port,
                token: token.map(String::from),
                log,
            };
            if core.wait_ready() {
                return core;
            }
            let log = core.log_text();
            if !log.contains("cannot listen for the admin API") {
                panic!("the core did not start:\n{log}");
            }
            let _ = core.child.wait();
        }
        panic!("no free admin port after 5 tries");
    }

    fn wait_ready(&mut self) -> bool {
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            if self.try_http("GET", "/v1/status", None, self.token.clone()).is_ok_and(|r| r.status == 200) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the core did not answer on its admin port within 15 s:\n{}", self.log_text());
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The JSON log lines (the core runs with --log-format json).
    pub fn log_events(&self) -> Vec<Value> {
        self.log_text().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// An HTTP call with the core's token (if any).
    pub fn http(&self, method: &str, path: &str, body: Option<&str>) -> Http {
        self.try_http(method, path, body, self.token.clone()).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    pub fn try_http(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<String>,
    ) -> std::io::Result<Http> {
        raw_http(self.port, method, path, body, token.as_deref())
    }

    pub fn get(&self, path: &str) -> Value {
        let r = self.http("GET", path, None);
        assert_eq!(r.status, 200, "GET {path}: {}", r.body);
        r.json()
    }

    /// Waits until `cond` holds for the service's JSON (GET /v1/services/{id}).
    pub fn wait_service(&self, id: u64, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let r = self.http("GET", &format!("/v1/services/{id}"), None);
            if r.status == 200 && cond(&r.json()) {
                return r.json();
            }
            assert!(
                Instant::now() < end,
                "service {id}: not {what} within 20 s; last: {}\nlog:\n{}",
                r.body,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the service runs with `instances` instances connected.
    pub fn wait_running(&self, id: u64, instances: u64) -> Value {
        self.wait_service(id, &format!("running with {instances} instances"), |v| {
            v["status"] == "running" && v["instances"] == instances
        })
    }

    /// Waits until `n` instances subscribe exactly `pattern` (connected is
    /// not yet subscribed).
    pub fn wait_subscribed(&self, pattern: &str, n: usize) {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let subs = self.get("/v1/subscriptions");
            let count = subs["subscriptions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["pattern"] == pattern)
                .map_or(0, |s| s["instances"].as_array().unwrap().len());
            if count == n {
                return;
            }
            assert!(Instant::now() < end, "{pattern}: {count} subscribers, not {n}, after 20 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An unmanaged instance (a test client) under `prefix`.
    pub fn client(&self, prefix: &str) -> cumulo::Api {
        cumulo::Api::connect(cumulo::Options::unmanaged(self.socket.display().to_string(), prefix))
            .expect("connect to the core")
    }

    pub fn sigterm(&self) {
        let ok = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
    }

    /// Waits for the core to exit (at most `limit`).
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let end = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < end, "the core did not exit within {limit:?}:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of one Prometheus sample, e.g.
    /// `cumulo_requests_received_total{service="/e/",service_id="1"}`.
    pub fn metric(&self, sample: &str) -> Option<f64> {
        let text = self.http("GET", "/metrics", None).body;
        metric_in(&text, sample)
    }
}

pub fn metric_in(text: &str, sample: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

impl Drop for TestCore {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("test core folder kept: {}", self.dir.display());
        }
    }
}

/// One HTTP/1.1 request on its own connection.
pub fn raw_http(port: u16, method: &str, path: &str, body: Option<&str>, token: Option<&str>) -> std::io::Result<Http> {
    raw_http_from(None, port, method, path, body, token)
}

/// `raw_http` from the loopback address `source` (127.0.0.2, ...) when
/// given: the admin API tells its callers apart by address.
pub fn raw_http_from(
    source: Option<std::net::Ipv4Addr>,
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> std::io::Result<Http> {
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = match source {
        None => TcpStream::connect(to)?,
        Some(ip) => {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            socket.bind(&std::net::SocketAddr::from((ip, 0)).into())?;
            socket.connect(&to.into())?;
            socket.into()
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let body = body.unwrap_or("");
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    // One write, as a client does: `write!` on the bare stream would send
    // each piece of the format in a write of its own, and a connection that
    // sent half a head may be closed to make room (see connections.rs).
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok(Http { status, headers: head.to_string(), body: body.to_string() })
}

/// The http_req request for `value` (its key/value body).
pub fn value_request(n: i64) -> Vec<u8> {
    format!("value\0{n}\0").into_bytes()
}

pub fn toml_str(p: &Path) -> String {
    format!("\"{}\"", p.display())
}

/// A `[[service]]` table running the Rust http_req example.
pub fn http_req_service(count_process: u32) -> String {
    format!(
        "[[service]]\nprefix = \"/tests/http_req/\"\npath = {}\ncount_process = {count_process}\n",
        toml_str(&http_req())
    )
}

/// `core.threads` of the cores the tests start: `CUMULO_TEST_THREADS`, else 1
/// (the test command runs the suites once with 1 and once with 2).
pub fn test_threads() -> u32 {
    std::env::var("CUMULO_TEST_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}
