//! The listener and its connections. Each accepted TcpStream is served by
//! hyper's HTTP/1.1 server (keep-alive, pipelining answered in order) in a
//! task of its own on the core's thread: hyper's http1 connection accepts
//! services that are not Send, so the gateway calls the core directly.
//! With `tls_cert` set, each connection is a TLS handshake first (cumulo-tls).

use super::deadlines::{Deadlines, Event, Guarded, Stamped, Timeouts};
use super::framing::{Limits, Watched};
use super::gateway::{Gateway, SAFETY_MARGIN};
use super::listening::{self, Listening};
use super::park::{IdleConnections, Rewind};
use super::settings::{Settings, HYPER_DEFAULT_MAX_HEADERS};
use cumulo_service::ServiceApi;
use cumulo_sys::Throttle;
use cumulo_tls::Tls;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::cell::RefCell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Pause after a failed accept (e.g. out of file descriptors): the error
/// would repeat at once, and a spinning loop would starve the core.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// Written to a connection over `max_connections` before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
content-length: 42\r\nconnection: close\r\n\r\nservice unavailable: too many connections\n";

pub async fn serve<A: ServiceApi + 'static>(
    listener: std::net::TcpListener,
    gateway: Gateway<A>,
    settings: Settings,
    tls: Option<Tls>,
) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => return tracing::error!("http: cannot use the listening socket: {e}"),
    };
    let gateway = Rc::new(gateway);
    let http = builder(&settings);
    // Shared with the other shards on this address (listening.rs).
    let scheme = if tls.is_some() { "https" } else { "http" };
    let shared = listening::join(listener.local_addr().ok(), scheme);
    let open = shared.open.clone();
    let on_shard = gateway.shard_label();
    let secure = tls.map(|tls| {
        let timeout = Duration::from_millis(settings.header_timeout_ms);
        Rc::new(Secure { tls, timeout, failures: RefCell::default(), on_shard: on_shard.clone() })
    });
    // Cancelled when this future is dropped (the core stops): open
    // connections finish their current request and close.
    let stopping = CancellationToken::new();
    let _stop_connections = stopping.clone().drop_guard();
    let _report = ReportOnStop(gateway.clone(), shared);
    let _stop_websockets = gateway.websockets.as_ref().map(|w| w.stopping.clone().drop_guard());
    let (mut refusals, mut accept_errors) = (Throttle::default(), Throttle::default());
    let idle = Rc::new(IdleConnections::default());
    let sweep = idle.sweep();
    tokio::pin!(sweep);
    loop {
        let accepted = tokio::select! {
            biased;
            a = listener.accept() => a,
            () = &mut sweep => continue, // never ends
        };
        match accepted {
            Ok((stream, remote)) => {
                if open.load(Ordering::Relaxed) >= settings.max_connections {
                    refuse(stream, &gateway);
                    refusals.warn(|n| {
                        format!(
                            "http: {n} connections refused{on_shard}: max_connections ({}) reached",
                            settings.max_connections
                        )
                    });
                    continue;
                }
                let _ = stream.set_nodelay(true);
                open.fetch_add(1, Ordering::Relaxed);
                let conn = Connection {
                    gateway: gateway.clone(),
                    http: http.clone(),
                    framing: framing_limits(&settings),
                    timeouts: timeouts(&settings),
                    open: open.clone(),
                    idle: idle.clone(),
                };
                match &secure {
                    None => tokio::task::spawn_local(conn.serve(stream, remote.to_string(), stopping.clone())),
                    Some(s) => tokio::task::spawn_local(s.clone().serve(conn, stream, remote, stopping.clone())),
                };
            }
            Err(e) => {
                accept_errors.warn(|n| {
                    format!(
                        "http: accept failed {n} times{on_shard}, last: {e} (check ulimit -n against max_connections)"
                    )
                });
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

pub(super) fn builder(s: &Settings) -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        // The head timeout is the connection's own (deadlines/): hyper's
        // would arm a timer per request.
        .header_read_timeout(None)
        // Without it hyper reads the socket during every call to notice a
        // client's close: that read finds the buffer still shared with the
        // request's head and allocates a new 8 KiB one, per request. With
        // it, a client that shuts down its sending side still gets its
        // answer; one that went away holds its connection until that
        // answer, `timeout_ms` at the latest (docs/GATEWAY.md).
        .half_close(true)
        .keep_alive(s.keepalive)
        .max_header_size(s.max_header_size);
    if s.max_headers != HYPER_DEFAULT_MAX_HEADERS {
        b.max_headers(s.max_headers);
    }
    b
}

pub(super) fn timeouts(s: &Settings) -> Timeouts {
    Timeouts {
        head: Duration::from_millis(s.header_timeout_ms),
        answer: Duration::from_millis(s.timeout_ms as u64) + SAFETY_MARGIN,
        park_after: Duration::from_millis(s.idle_park_ms),
    }
}

pub(super) fn framing_limits(s: &Settings) -> Limits {
    Limits { max_body: s.max_body as u64, max_header_size: s.max_header_size, max_headers: s.max_headers }
}

/// A TLS listener's handshakes: each within the header timeout, the
/// failures counted and logged (throttled).
struct Secure {
    tls: Tls,
    timeout: Duration,
    failures: RefCell<Throttle>,
    on_shard: String,
}

impl Secure {
    /// The handshake, then the connection as over plain TCP. A client that
    /// speaks plaintext, trusts another CA or stalls is closed; the
    /// listener goes on.
    async fn serve<A: ServiceApi + 'static>(
        self: Rc<Self>,
        conn: Connection<A>,
        stream: TcpStream,
        remote: SocketAddr,
        stop: CancellationToken,
    ) {
        let handshake = tokio::time::timeout(self.timeout, self.tls.accept(stream));
        let outcome = tokio::select! {
            r = handshake => r,
            () = stop.cancelled() => return,
        };
        let why = match outcome {
            Ok(Ok(stream)) => return conn.serve(stream, remote.to_string(), stop).await,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("not finished within header_timeout_ms ({} ms)", self.timeout.as_millis()),
        };
        self.tls.listener().count_handshake_failure();
        let n = &conn.gateway.counts.tls_handshake_failures;
        n.set(n.get() + 1);
        self.failures
            .borrow_mut()
            .warn(|n| format!("http: {n} TLS handshakes failed{}, last from {remote}: {why}", self.on_shard));
    }
}

/// Over the limit: a short 503 if the socket takes it at once, then close.
fn refuse<A>(stream: TcpStream, gateway: &Gateway<A>) {
    let _ = stream.try_write(TOO_MANY_CONNECTIONS);
    let n = &gateway.counts.refused_connections;
    n.set(n.get() + 1);
}

pub(super) struct Connection<A> {
    pub gateway: Rc<Gateway<A>>,
    pub http: http1::Builder,
    /// What the framing watch refuses (framing/).
    pub framing: Limits,
    /// The head and answer deadlines (deadlines/).
    pub timeouts: Timeouts,
    /// Open connections, decremented when this one is dropped.
    pub open: Arc<AtomicUsize>,
    /// The listener's connections waiting to be parked (park.rs).
    pub idle: Rc<IdleConnections>,
}

impl<A: ServiceApi + 'static> Connection<A> {
    /// Serves one connection until it ends. Any byte stream will do (the
    /// fuzz targets use an in-memory one); `remote` is the client's
    /// `ip:port`, as services see it in `remote_addr`.
    pub async fn serve<S>(self, stream: S, remote: String, stopping: CancellationToken)
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let gateway = self.gateway.clone();
        let client: Rc<str> = Rc::from(remote.as_str());
        let deadlines = Deadlines::new(self.timeouts);
        let watch = deadlines.clone();
        let service = service_fn(move |req| {
            let (gateway, client, deadlines) = (gateway.clone(), client.clone(), deadlines.clone());
            async move {
                let serving = deadlines.serving();
                let response = gateway.handle(req, &client, &deadlines).await;
                Ok::<_, Infallible>(response.map(|body| Guarded::new(body, serving)))
            }
        });
        let mut io = Rewind::new(Watched::new(Stamped::new(stream, watch.clone()), self.framing));
        // The connection's one timer (deadlines/), for its whole life.
        let sleep = watch.timer();
        tokio::pin!(sleep);
        let expired =
            || tracing::debug!("http: connection from {remote} closed: no request head within the header timeout");
        loop {
            // Parked (park.rs): no hyper connection until bytes arrive.
            tokio::select! {
                biased;
                r = io.fill() => match r {
                    Ok(0) | Err(_) => return, // closed by the client, or reset
                    Ok(_) => {}
                },
                _ = watch.next(sleep.as_mut()) => return expired(),
                () = stopping.cancelled() => return,
            }
            watch.unparked();
            // Boxed: the task of a parked connection keeps no room for it.
            let mut conn = Box::new(self.http.serve_connection(TokioIo::new(io), service.clone()).with_upgrades());
            let result = tokio::select! {
                biased;
                r = &mut *conn => r,
                event = watch.next_or_idle(sleep.as_mut(), &self.idle) => match event {
                    Event::HeadExpired => return expired(),
                    Event::Idle => match conn.into_parts() {
                        Some(parts) => {
                            io = parts.io.into_inner();
                            io.unread(parts.read_buf);
                            continue;
                        }
                        None => return, // upgraded: the connection is the WebSocket's now
                    },
                },
                // The request in progress is finished, then the connection closed.
                () = stopping.cancelled() => {
                    std::pin::Pin::new(&mut *conn).graceful_shutdown();
                    tokio::select! {
                        r = &mut *conn => r,
                        _ = watch.next(sleep.as_mut()) => return expired(),
                    }
                }
            };
            // Client resets, parse errors and the like end up here; they are
            // the client's business, not worth a line at the default level.
            if let Err(e) = result {
                tracing::debug!("http: connection from {remote} ended: {e}");
            }
            return;
        }
    }
}

impl<A> Drop for Connection<A> {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Logs the gateway's stop once, when the last shard stops (listening.rs).
struct ReportOnStop<A>(Rc<Gateway<A>>, Arc<Listening>);

impl<A> Drop for ReportOnStop<A> {
    fn drop(&mut self) {
        self.1.leave(&self.0.counts);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn refusal_content_length_matches_its_body() {
        let text = std::str::from_utf8(super::TOO_MANY_CONNECTIONS).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())));
    }
}
