//! nats-reqrep against real nats-server processes: the ceiling it reports
//! is only worth something if its requests really cross NATS and come back.

use cumulo_e2e::nats::{NatsCluster, NatsServer};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nats-reqrep");

/// A responder, killed on drop.
struct Responder(Child);

impl Responder {
    /// Starts one on `url` and waits for its "ready" line.
    fn start(url: &str) -> Responder {
        let mut child = Command::new(BIN)
            .args(["respond", "--server", url])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start responder");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("ready"), "responder said {line:?}");
        Responder(child)
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn request(url: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args(["request", "--server", url, "--concurrency", "4", "--duration", "0.5", "--warmup", "0"])
        .args(extra)
        .output()
        .expect("run requester")
}

fn field(line: &str, key: &str) -> u64 {
    let prefix = format!("{key}=");
    let value = line.split(' ').find_map(|kv| kv.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {key} in {line}"));
    value.parse::<f64>().unwrap() as u64
}

#[test]
fn requests_cross_a_route_and_are_measured() {
    let nats = NatsCluster::start(2);
    let _responder = Responder::start(&nats.servers[1].url());
    let out = request(&nats.servers[0].url(), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "requester failed: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().last().unwrap();
    assert!(field(line, "requests") > 0, "{line}");
    assert_eq!(field(line, "errors"), 0, "{line}");
    assert!(field(line, "p50_us") >= 1 && field(line, "p50_us") <= field(line, "p99_us"), "{line}");
}

#[test]
fn no_responder_is_an_error_not_a_hang() {
    let nats = NatsServer::start(None);
    let started = Instant::now();
    let out = request(&nats.url(), &["--ready-wait-ms", "300"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no answer on bench.reqrep"), "{out:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
}
