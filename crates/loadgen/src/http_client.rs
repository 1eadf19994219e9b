//! Sends HTTP/1.1 GET requests over keep-alive connections (hyper client),
//! each connection one lane of the schedule: one request at a time per
//! connection, so a slow answer delays that lane's next requests, and that
//! delay counts in their latency (they are measured from when they were due).
//! Connections are opened before the run starts, a bounded number at a time,
//! so a test with 20,000 connections measures 20,000 open connections, not a
//! connect storm.

use super::answer::{contains, excerpt};
use super::recorder::{Outcome, SharedRecorder};
use super::schedule::{latency_origin, Due, Pacer, Schedule};
use anyhow::{anyhow, bail, Context};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};

/// Where the requests go.
#[derive(Debug)]
pub struct HttpTarget {
    pub url: String,
    pub addr: SocketAddr,
    pub host: String,
    pub path: String,
    pub timeout: Duration,
    pub check: Option<Vec<u8>>,
}

impl HttpTarget {
    /// Parses and resolves `http://host:port/path?query`.
    pub async fn new(url: &str, timeout: Duration, check: Option<Vec<u8>>) -> anyhow::Result<HttpTarget> {
        let uri: Uri = url.parse().map_err(|e| anyhow!("--url '{url}': {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => bail!("--url '{url}': scheme '{other}' is not supported (only http://)"),
            None => bail!("--url '{url}': give a full URL, e.g. http://127.0.0.1:8080/path"),
        }
        let host = uri.host().ok_or_else(|| anyhow!("--url '{url}': no host"))?;
        let port = uri.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((host, port))
            .await
            .with_context(|| format!("--url '{url}': cannot resolve {host}"))?
            .next()
            .ok_or_else(|| anyhow!("--url '{url}': {host} has no address"))?;
        let host_header = match uri.port_u16() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let path = uri.path_and_query().map_or("/".to_string(), |p| p.as_str().to_string());
        Ok(HttpTarget { url: url.to_string(), addr, host: host_header, path, timeout, check })
    }
}

type Sender = SendRequest<Empty<Bytes>>;

async fn open(t: &HttpTarget) -> anyhow::Result<Sender> {
    let stream = tokio::net::TcpStream::connect(t.addr).await.with_context(|| format!("connect {}", t.addr))?;
    stream.set_nodelay(true)?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::task::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Opened so far, across all threads: the run starts when all have tried.
#[derive(Default)]
pub struct ConnectCount {
    pub tried: AtomicUsize,
    pub failed: AtomicUsize,
}

/// Runs the lanes `lanes_here` (of `lanes` in total) on the current thread's
/// runtime until the pace stops.
pub async fn run_lanes(
    target: Arc<HttpTarget>,
    lanes_here: Vec<usize>,
    lanes: usize,
    pace: watch::Receiver<Schedule>,
    rec: SharedRecorder,
    count: Arc<ConnectCount>,
) {
    // Many concurrent connects overflow the listener's backlog and cost
    // SYN retransmits (seconds): open them a bounded number at a time.
    let gate = Arc::new(Semaphore::new(128));
    let local = tokio::task::LocalSet::new();
    for lane in lanes_here {
        let (t, pace, rec, count, gate) = (target.clone(), pace.clone(), rec.clone(), count.clone(), gate.clone());
        local.spawn_local(async move {
            let sender = {
                let _permit = gate.acquire().await;
                let s = open(&t).await.ok();
                if s.is_none() {
                    count.failed.fetch_add(1, Ordering::Relaxed);
                }
                count.tried.fetch_add(1, Ordering::Relaxed);
                s
            };
            run_lane(&t, sender, Pacer::new(lane, lanes, pace), &rec).await;
        });
    }
    local.await;
}

async fn run_lane(t: &HttpTarget, mut sender: Option<Sender>, mut pacer: Pacer, rec: &SharedRecorder) {
    loop {
        let due = match pacer.next().await {
            Due::Stop => return,
            Due::At(d) => Some(d),
            Due::Now => None,
        };
        if sender.as_ref().is_none_or(|s| s.is_closed()) {
            sender = open(t).await.ok();
        }
        let now = Instant::now();
        let origin = due.map_or(now, |d| latency_origin(d, now));
        rec.lock().sent();
        let Some(s) = sender.as_mut() else {
            rec.lock().done(
                origin.elapsed().as_micros() as u64,
                &Outcome::error("connection", format!("cannot connect to {}", t.addr)),
            );
            // Do not spin on a refused connection.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let outcome = match tokio::time::timeout(t.timeout, get(s, t)).await {
            Ok(Ok((status, body))) if status.is_success() => match &t.check {
                Some(c) if !contains(&body, c) => Outcome::error(
                    "check",
                    format!("answer does not contain '{}': '{}'", String::from_utf8_lossy(c), excerpt(&body)),
                ),
                _ => Outcome::Ok,
            },
            Ok(Ok((status, body))) => Outcome::error(
                format!("HTTP {}", status.as_u16()),
                format!("HTTP {}: {}", status.as_u16(), excerpt(&body)),
            ),
            Ok(Err(e)) => {
                sender = None;
                Outcome::error("connection", format!("{e:#}"))
            }
            Err(_) => {
                // The connection is mid-request: it cannot be reused.
                sender = None;
                Outcome::Timeout
            }
        };
        rec.lock().done(origin.elapsed().as_micros() as u64, &outcome);
    }
}

async fn get(s: &mut Sender, t: &HttpTarget) -> anyhow::Result<(hyper::StatusCode, Bytes)> {
    s.ready().await?;
    let req = hyper::Request::get(t.path.as_str())
        .header(hyper::header::HOST, t.host.as_str())
        .header(hyper::header::USER_AGENT, "cumulo-bench")
        .body(Empty::new())?;
    let resp = s.send_request(req).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// Raises the open-files limit to at least `needed` if allowed (a test with
/// N connections needs N descriptors): the soft limit up to the hard one,
/// and the hard one too where the process may (root); returns the limit in
/// force.
pub fn raise_fd_limit(needed: u64) -> u64 {
    use rlimit::Resource;
    let (soft, hard) = Resource::NOFILE.get().unwrap_or((1024, 1024));
    if soft >= needed {
        return soft;
    }
    if hard < needed {
        let _ = Resource::NOFILE.set(needed, needed);
    }
    rlimit::increase_nofile_limit(u64::MAX).unwrap_or(soft)
}
