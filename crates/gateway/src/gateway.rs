//! One HTTP request, start to end: map it to a service name and request,
//! send it (`InternalApi::call`), and turn the answer (or the error) into
//! the HTTP response. Every path ends in a response; none waits forever.

use super::access_log::{AccessLog, Entry};
use super::allow::allowed;
use super::deadlines::Deadlines;
use super::errors;
use super::framing::is_oversized_chunk;
use super::names::NameMapping;
use super::request::{query_request, request_info, takes_query};
use super::response::{from_service, plain, plain_and_close, HttpResponse};
use super::security_headers;
use super::server_span::ServerSpan;
use super::settings::{ErrorDetail, HeaderFilter, QueryFormat, Settings};
use super::websocket::WebSockets;
use bytes::Bytes;
use cumulo_proto::Status;
use cumulo_service::trace::Recorder;
use cumulo_service::{Response, SendOptions, ServiceApi};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, ALLOW};
use hyper::http::request::Parts;
use hyper::{Method, Request, StatusCode};
use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Extra time past `timeout_ms` before the gateway stops waiting on its own.
/// The core always answers a request by its deadline (TIMEOUT at worst);
/// this only guarantees that no HTTP client can hang if that ever failed.
pub const SAFETY_MARGIN: Duration = Duration::from_secs(1);

pub struct Gateway<A> {
    api: A,
    names: NameMapping,
    headers: HeaderFilter,
    query_format: QueryFormat,
    max_body: usize,
    body_timeout: Duration,
    send: SendOptions,
    /// What a 5xx answer tells the client (errors.rs).
    detail: ErrorDetail,
    log: Option<Arc<AccessLog>>,
    /// `security_headers`: None when off, else whether HSTS goes too (TLS).
    security_headers: Option<bool>,
    pub counts: Counts,
    /// None when no path accepts WebSocket upgrades.
    pub websockets: Option<WebSockets<A>>,
    /// Where the gateway's SERVER spans go (`[tracing]` on).
    tracer: Option<Recorder>,
    traceresponse: bool,
}

/// Requests answered, by status class; logged when the gateway stops
/// (listening.rs).
#[derive(Default)]
pub struct Counts {
    pub by_class: [Cell<u64>; 6],
    pub refused_connections: Cell<u64>,
    pub tls_handshake_failures: Cell<u64>,
}

impl<A: ServiceApi + 'static> Gateway<A> {
    pub fn new(api: A, s: &Settings, log: Option<Arc<AccessLog>>) -> Gateway<A> {
        // A filesystem service of this core may answer it with an open file.
        api.take_file_handles();
        let tracer = api.tracer();
        Gateway {
            tracer,
            traceresponse: s.traceresponse,
            api,
            names: NameMapping { name_prefix: s.name_prefix.clone(), method_suffix: s.method_suffix },
            headers: s.headers.clone(),
            query_format: s.query_format,
            max_body: s.max_body,
            body_timeout: Duration::from_millis(s.body_timeout_ms),
            send: SendOptions { timeout_ms: s.timeout_ms, priority: 0, wait_for_service: false },
            detail: s.error_detail.unwrap_or(ErrorDetail::Hidden),
            log,
            security_headers: s.security_headers.then_some(s.tls.is_some()),
            counts: Counts::default(),
            websockets: WebSockets::new(
                s.websocket.clone(),
                NameMapping { name_prefix: s.name_prefix.clone(), method_suffix: s.method_suffix },
                s.headers.clone(),
            ),
        }
    }

    /// `" on shard N"` with more than one shard, for the lines a shard logs
    /// of its own part of the gateway.
    pub fn shard_label(&self) -> String {
        match self.api.shard() {
            (_, 1) => String::new(),
            (i, _) => format!(" on shard {i}"),
        }
    }

    /// `remote` is the client's `ip:port`, formatted once per connection.
    /// `deadlines` tells when the request is past its answer time (the
    /// connection's timer, deadlines/).
    pub async fn handle(&self, req: Request<Incoming>, remote: &Rc<str>, deadlines: &Deadlines) -> HttpResponse {
        if let Some(ws) = &self.websockets {
            if let Some(path) = ws.accepts(&req) {
                let mut resp = ws.upgrade(&self.api, path, req, remote);
                let n = &self.counts.by_class[(resp.status().as_u16() / 100).min(5) as usize];
                n.set(n.get() + 1);
                if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
                    self.secure(&mut resp);
                }
                return resp;
            }
        }
        let (parts, body) = req.into_parts();
        let logged = self.log.is_some().then(|| Logged::of(&parts));
        let span = self.tracer.as_ref().map(|t| ServerSpan::start(&parts, t));
        let mut served = None;
        let mut resp = match self.dispatch(parts, body, remote, deadlines, span.as_ref()).await {
            Ok((name, answer)) => {
                let resp = self.answer(&name, answer, deadlines).await;
                served = Some(name);
                resp
            }
            Err(refused) => refused,
        };
        self.secure(&mut resp);
        self.count(logged.as_ref(), &resp, remote);
        if let (Some(span), Some(tracer)) = (span, &self.tracer) {
            if self.traceresponse {
                if let Some(v) = span.traceresponse() {
                    resp.headers_mut().insert("traceresponse", v);
                }
            }
            span.finish(tracer, resp.status(), served.as_deref(), remote);
        }
        resp
    }

    fn secure(&self, resp: &mut HttpResponse) {
        if let Some(tls) = self.security_headers {
            security_headers::add(resp.headers_mut(), tls);
        }
    }

    /// Maps the request and sends it to its service, or answers it at
    /// once. The request is dropped here, once copied into its frame, not
    /// held while its answer is awaited: a body of up to `max_body` bytes
    /// is not kept twice, nor hyper's read buffer, which the head's bytes
    /// share, kept from the connection's next read.
    async fn dispatch(
        &self,
        parts: Parts,
        body: Incoming,
        remote: &Rc<str>,
        deadlines: &Deadlines,
        span: Option<&ServerSpan>,
    ) -> Result<(String, impl Future<Output = Response>), HttpResponse> {
        let name = self.names.service_name(&parts.method, parts.uri.path());
        if let Some(why) = host_problem(&parts) {
            return Err(plain_and_close(StatusCode::BAD_REQUEST, format!("bad request: {why}\n")));
        }
        if name.len() > self.api.max_name() {
            let max = self.api.max_name();
            let text =
                format!("uri too long: the service name would be {} bytes, over {max} (core.max_name)\n", name.len());
            return Err(plain_and_close(StatusCode::URI_TOO_LONG, text));
        }
        let payload = self.payload(&parts, body).await?;
        deadlines.answer_from_now(); // the time taken by a body is not the service's
        let mut info = request_info(&parts, remote, &self.headers);
        if let Some(span) = span {
            info = span.request_info(info);
        }
        let answer = self.api.call(&name, &info, &payload, self.send);
        Ok((name, answer))
    }

    /// The service request: the query for GET/HEAD/DELETE, else the body
    /// (at most `max_body` bytes).
    async fn payload(&self, parts: &Parts, body: Incoming) -> Result<Bytes, HttpResponse> {
        if takes_query(&parts.method) {
            let query = parts.uri.query().unwrap_or("");
            return query_request(query, self.query_format)
                .map(Bytes::from)
                .map_err(|why| plain(StatusCode::BAD_REQUEST, format!("bad request: {why}\n")));
        }
        let too_large = || {
            // The body is left unread, so the connection cannot be reused.
            plain_and_close(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("payload too large: the request body is over max_body ({} bytes)\n", self.max_body),
            )
        };
        if body.size_hint().lower() > self.max_body as u64 {
            return Err(too_large()); // known from Content-Length: refuse before reading
        }
        // A client that sends its head and then trickles (or never sends)
        // the body would otherwise hold the connection forever: the header
        // timeout ends with the head.
        let read = tokio::time::timeout(self.body_timeout, Limited::new(body, self.max_body).collect());
        match read.await {
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.is::<LengthLimitError>() || is_oversized_chunk(&*e) => Err(too_large()),
            Ok(Err(e)) => {
                Err(plain_and_close(StatusCode::BAD_REQUEST, format!("bad request: cannot read the body: {e}\n")))
            }
            Err(_) => Err(plain_and_close(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request timeout: the body did not arrive within body_timeout_ms ({} ms)\n",
                    self.body_timeout.as_millis()
                ),
            )),
        }
    }

    async fn answer(&self, name: &str, answer: impl Future<Output = Response>, deadlines: &Deadlines) -> HttpResponse {
        tokio::select! {
            biased;
            answer = answer => match self.not_allowed(name, &answer) {
                Some(resp) => resp,
                None => from_service(answer, name, self.detail),
            },
            () = deadlines.overdue() => errors::answer(
                self.detail,
                StatusCode::GATEWAY_TIMEOUT,
                format!("gateway timeout: no answer for '{name}' within {} ms\n", self.send.timeout_ms),
            ),
        }
    }

    /// 405 for a name no service subscribes whose path is served for other
    /// methods (allow.rs); None for any other answer.
    fn not_allowed(&self, name: &str, answer: &Response) -> Option<HttpResponse> {
        if answer.status != Status::NoService || !self.names.method_suffix {
            return None;
        }
        let allow = allowed(&self.api, name)?;
        let text = format!("method not allowed: no service for '{name}'; its path is served for {allow}\n");
        let mut resp = plain(StatusCode::METHOD_NOT_ALLOWED, text);
        // Method names and ", ": always a valid header value.
        resp.headers_mut().insert(ALLOW, HeaderValue::from_str(&allow).ok()?);
        Some(resp)
    }

    fn count(&self, logged: Option<&Logged>, resp: &HttpResponse, remote: &str) {
        let class = (resp.status().as_u16() / 100).min(5) as usize;
        let n = &self.counts.by_class[class];
        n.set(n.get() + 1);
        if let (Some(log), Some(l)) = (&self.log, logged) {
            log.record(&Entry {
                remote,
                method: l.method.as_str(),
                target: &l.target,
                version: l.version,
                status: resp.status().as_u16(),
                body_bytes: resp.body().size_hint().exact().unwrap_or(0),
                started: l.started,
            });
        }
    }
}

/// What the access log needs of a request, copied: the request itself is
/// dropped before its answer comes (`Gateway::dispatch`). Taken only when
/// the log is on (the clock included).
struct Logged {
    method: Method,
    target: String,
    version: &'static str,
    started: Instant,
}

impl Logged {
    fn of(parts: &Parts) -> Logged {
        Logged {
            method: parts.method.clone(),
            target: parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
            version: version_name(parts),
            started: Instant::now(),
        }
    }
}

/// RFC 9112 section 3.2: a server answers 400 to an HTTP/1.1 request
/// without a Host header, and to any request with more than one. (hyper
/// passes both; a service behind the gateway may route or check by Host.)
fn host_problem(parts: &Parts) -> Option<&'static str> {
    let mut hosts = parts.headers.get_all(hyper::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) if parts.version == hyper::Version::HTTP_11 => Some("an HTTP/1.1 request needs a Host header"),
        (Some(_), Some(_)) => Some("more than one Host header"),
        _ => None,
    }
}

fn version_name(parts: &Parts) -> &'static str {
    if parts.version == hyper::Version::HTTP_10 {
        "HTTP/1.0"
    } else {
        "HTTP/1.1"
    }
}
