//! One exchange: a connection from the pool, the request, the answer read
//! up to its size limit, redirects if asked; all within one deadline.

use crate::connect::Step;
use crate::error::{Error, ErrorKind};
use crate::outgoing::{Outgoing, HOP_BY_HOP};
use crate::pool::Pool;
use crate::report::Counters;
use crate::settings::Settings;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_LENGTH, HOST, LOCATION};
use hyper::Method;
use std::cell::Cell;
use std::rc::Rc;
use tokio::time::Instant;

/// What the server answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Headers in order, names in lower case, hop-by-hop ones left out.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// An HTTP client with a pool: what the `http_client` service sends
/// through, and a library for other services of the core.
pub struct Client {
    pool: Rc<Pool>,
    max_body: usize,
    pub(crate) counters: Counters,
}

impl Client {
    /// A client whose answers are at most `max_body` bytes (the service
    /// passes the smaller of `max_response_bytes` and the core's frame).
    pub fn new(settings: &Settings, max_body: usize) -> Result<Client, String> {
        let tls = crate::connect::tls_connector(settings)?;
        let pool = Pool::new(tls, settings);
        Ok(Client { pool: Rc::new(pool), max_body, counters: Counters::default() })
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Sends `out` and reads the answer, by `deadline` at the latest.
    pub async fn send(&self, out: Outgoing, deadline: Instant) -> Result<Answer, Error> {
        let step = Cell::new(Step::Slot);
        let origin = out.origin.clone();
        self.counters.in_flight.set(self.counters.in_flight.get() + 1);
        let result = match tokio::time::timeout_at(deadline, self.follow(out, &step)).await {
            Ok(r) => r,
            Err(_) => Err(Error::new(
                ErrorKind::Timeout,
                format!("{origin}: timed out {} (the request's deadline)", step.get().doing()),
            )),
        };
        self.counters.in_flight.set(self.counters.in_flight.get() - 1);
        self.counters.count(&result);
        result
    }

    async fn follow(&self, mut out: Outgoing, step: &Cell<Step>) -> Result<Answer, Error> {
        let mut followed = 0;
        loop {
            let answer = self.once(&out, step).await?;
            let location = answer.headers.iter().find(|(k, _)| k == LOCATION.as_str()).map(|(_, v)| v.clone());
            let (true, Some(location)) = (matches!(answer.status, 301 | 302 | 303 | 307 | 308), location) else {
                return Ok(answer);
            };
            if out.max_redirects == 0 {
                return Ok(answer);
            }
            if followed == out.max_redirects {
                return Err(Error::new(
                    ErrorKind::Redirects,
                    format!("{}: more than {followed} redirects (http_client_max_redirects)", out.origin),
                ));
            }
            let location = String::from_utf8_lossy(&location).into_owned();
            out = out.redirected(answer.status, &location)?;
            followed += 1;
            self.counters.redirects.set(self.counters.redirects.get() + 1);
        }
    }

    /// One request on one connection; once more on a new one when a reused
    /// connection turns out closed by its server before it took the request.
    async fn once(&self, out: &Outgoing, step: &Cell<Step>) -> Result<Answer, Error> {
        let mut tries = 0;
        loop {
            tries += 1;
            step.set(Step::Slot);
            let mut conn = self.pool.checkout(&out.origin, step).await?;
            step.set(Step::Head);
            let result = conn.sender.send_request(request(out)?).await;
            let mut response = match result {
                Ok(r) => r,
                Err(e) if conn.reused && tries == 1 && stale(&e, &out.method) => continue,
                Err(e) => return Err(hyper_error(&out.origin.to_string(), &e)),
            };
            step.set(Step::Body);
            let status = response.status().as_u16();
            let too_large = |n: u64| {
                Error::new(
                    ErrorKind::TooLarge,
                    format!("{}: the answer's body is over {} bytes ({n} or more)", out.origin, self.max_body),
                )
            };
            let declared = response.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Some(n) = declared.filter(|n| *n > self.max_body as u64 && out.method != Method::HEAD) {
                // Closed unread: a large body is never received at all.
                return Err(too_large(n));
            }
            let headers = response
                .headers()
                .iter()
                .filter(|(k, _)| !HOP_BY_HOP.contains(&k.as_str()) || *k == CONTENT_LENGTH)
                .map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec()))
                .collect();
            let mut body = Vec::with_capacity(declared.map_or(0, |n| n as usize));
            while let Some(frame) = response.body_mut().frame().await {
                let frame = frame.map_err(|e| hyper_error(&out.origin.to_string(), &e))?;
                if let Ok(data) = frame.into_data() {
                    if body.len() + data.len() > self.max_body {
                        return Err(too_large((body.len() + data.len()) as u64));
                    }
                    body.extend_from_slice(&data);
                }
            }
            self.pool.give_back(conn).await;
            return Ok(Answer { status, headers, body });
        }
    }
}

/// The hyper request: origin-form target, `Host`, the caller's headers.
fn request(out: &Outgoing) -> Result<hyper::Request<Full<Bytes>>, Error> {
    let mut req = hyper::Request::builder().method(out.method.clone()).uri(out.target.as_str());
    let headers = req.headers_mut().expect("a builder without an error yet");
    let host = HeaderValue::from_str(&out.origin.authority())
        .map_err(|_| Error::new(ErrorKind::BadRequest, format!("bad host '{}'", out.origin.host)))?;
    headers.insert(HOST, host);
    for (name, value) in &out.headers {
        if name == HOST {
            headers.insert(HOST, value.clone());
        } else {
            headers.append(name.clone(), value.clone());
        }
    }
    req.body(Full::new(out.body.clone()))
        .map_err(|e| Error::new(ErrorKind::BadRequest, format!("bad request target '{}': {e}", out.target)))
}

/// Whether a failure on a reused connection is its server having closed
/// it while idle, so that the request was not taken: tried again once.
fn stale(e: &hyper::Error, method: &Method) -> bool {
    e.is_canceled() || (e.is_incomplete_message() && method.is_idempotent())
}

/// A hyper error as a kind and its cause chain.
fn hyper_error(origin: &str, e: &hyper::Error) -> Error {
    let mut why = format!("{origin}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why.push_str(": ");
        why.push_str(&s.to_string());
        source = s.source();
    }
    let kind = if e.is_parse() || e.is_parse_status() { ErrorKind::Protocol } else { ErrorKind::Reset };
    Error::new(kind, why)
}
