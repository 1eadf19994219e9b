//! A service request read as an HTTP request: the method from the name, the
//! URL and headers from request_info (docs/HTTP_CLIENT.md), the body as is.

use crate::error::{Error, ErrorKind};
use crate::settings::MAX_REDIRECTS;
use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};

/// The methods served, each a pattern of its own (`<prefix>get`, ...).
pub const METHODS: [&str; 7] = ["get", "head", "post", "put", "patch", "delete", "options"];

/// request_info keys that address the request or set its options: never
/// sent as headers. The gateway's own keys are here too, so a gateway
/// request forwarded as is does not leak them.
const ADDRESSING: &[&str] =
    &["url", "scheme", "path", "query", "method", "remote_addr", "http_version", "status", "http_client_max_redirects"];

/// Hop-by-hop headers (RFC 9110 section 7.6.1) and the body's framing, which
/// belong to one connection and are never passed on, either way.
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];

/// Where a request goes: one pool key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub https: bool,
    /// As in the URL (an IPv6 address in brackets).
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The `Host` header's value: the port only when not the scheme's own.
    pub fn authority(&self) -> String {
        match (self.https, self.port) {
            (true, 443) | (false, 80) => self.host.clone(),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", if self.https { "https" } else { "http" }, self.host, self.port)
    }
}

/// One HTTP request to send.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub origin: Origin,
    /// The origin-form target: path and query.
    pub target: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    pub max_redirects: u32,
}

fn bad(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::BadRequest, why)
}

impl Outgoing {
    /// Reads the request `<prefix><method>` with its request_info and body.
    /// `max_redirects` applies unless request_info sets
    /// `http_client_max_redirects`.
    pub fn from_request(method: &str, info: &[u8], body: &[u8], max_redirects: u32) -> Result<Outgoing, Error> {
        let method = match METHODS.contains(&method) {
            true => Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| bad("bad method"))?,
            false => return Err(bad(format!("unknown method '{method}' (known: {})", METHODS.join(", ")))),
        };
        let pairs = cumulo_service::info::parse_all(info).map_err(|e| bad(format!("request_info: {e}")))?;
        let text = |key: &str| -> Result<Option<&str>, Error> {
            match pairs.iter().find(|(k, _)| *k == key.as_bytes()) {
                None => Ok(None),
                Some((_, v)) => {
                    std::str::from_utf8(v).map(Some).map_err(|_| bad(format!("request_info {key}: not UTF-8")))
                }
            }
        };
        let url = match text("url")? {
            Some(url) => url.to_string(),
            None => {
                let Some(host) = text("host")? else {
                    return Err(bad("request_info has neither 'url' nor 'host': nowhere to send the request"));
                };
                let scheme = text("scheme")?.unwrap_or("https");
                let path = text("path")?.unwrap_or("/");
                if !path.starts_with('/') {
                    return Err(bad(format!("request_info path '{path}' must start with '/'")));
                }
                match text("query")? {
                    Some(q) if !q.is_empty() => format!("{scheme}://{host}{path}?{q}"),
                    _ => format!("{scheme}://{host}{path}"),
                }
            }
        };
        let (origin, target) = parse_url(&url)?;
        let max_redirects = match text("http_client_max_redirects")? {
            None => max_redirects,
            Some(n) => match n.parse::<u32>() {
                Ok(n) if n <= MAX_REDIRECTS => n,
                _ => {
                    return Err(bad(format!(
                        "http_client_max_redirects '{n}' must be an integer in 0 ..= {MAX_REDIRECTS}"
                    )))
                }
            },
        };
        let connection_named: Vec<String> = pairs
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(b"connection"))
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v).split(',').map(|s| s.trim().to_ascii_lowercase()).collect::<Vec<_>>()
            })
            .collect();
        let mut headers = Vec::with_capacity(pairs.len());
        for (k, v) in &pairs {
            let name = HeaderName::from_bytes(k)
                .map_err(|_| bad(format!("request_info key '{}' is not a header name", String::from_utf8_lossy(k))))?;
            let s = name.as_str();
            if ADDRESSING.contains(&s) || HOP_BY_HOP.contains(&s) || connection_named.iter().any(|c| c == s) {
                continue;
            }
            // Without `url`, `host` names the target; the Host header is made
            // from it. With `url`, a `host` key is the Host header to send.
            if s == "host" && !pairs.iter().any(|(k, _)| *k == b"url") {
                continue;
            }
            let value =
                HeaderValue::from_bytes(v).map_err(|_| bad(format!("request_info {s}: not a valid header value")))?;
            headers.push((name, value));
        }
        Ok(Outgoing { method, origin, target, headers, body: Bytes::copy_from_slice(body), max_redirects })
    }

    /// The request a redirect asks for (RFC 9110 section 15.4): 303, and a
    /// POST answered 301 or 302, become a GET without a body; 307 and 308
    /// keep the method and body. Credentials are not sent to another origin.
    pub fn redirected(&self, status: u16, location: &str) -> Result<Outgoing, Error> {
        let (origin, target) = if location.starts_with("http://") || location.starts_with("https://") {
            parse_url(location)?
        } else if location.starts_with("//") {
            let scheme = if self.origin.https { "https:" } else { "http:" };
            parse_url(&format!("{scheme}{location}"))?
        } else if location.starts_with('/') {
            (self.origin.clone(), location.to_string())
        } else {
            // relative to the current path's folder
            let path = self.target.split('?').next().unwrap_or("/");
            let folder = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            (self.origin.clone(), format!("{folder}{location}"))
        };
        target.parse::<Uri>().map_err(|_| Error::new(ErrorKind::Protocol, format!("bad Location '{location}'")))?;
        let mut next = self.clone();
        let to_get = status == 303 || (matches!(status, 301 | 302) && self.method == Method::POST);
        if to_get && self.method != Method::HEAD {
            next.method = Method::GET;
            next.body = Bytes::new();
            next.headers.retain(|(n, _)| !n.as_str().starts_with("content-"));
        }
        if origin != self.origin {
            next.headers.retain(|(n, _)| !matches!(n.as_str(), "authorization" | "cookie" | "proxy-authorization"));
        }
        next.origin = origin;
        next.target = target;
        Ok(next)
    }
}

/// `http(s)://host[:port][/path][?query]`: the origin and the target.
pub fn parse_url(url: &str) -> Result<(Origin, String), Error> {
    let uri: Uri = url.parse().map_err(|e| bad(format!("bad URL '{url}': {e}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        Some(other) => return Err(bad(format!("bad URL '{url}': scheme '{other}' (http or https)"))),
        None => return Err(bad(format!("bad URL '{url}': no scheme (http:// or https://)"))),
    };
    let Some(authority) = uri.authority() else { return Err(bad(format!("bad URL '{url}': no host"))) };
    if authority.as_str().contains('@') {
        return Err(bad(format!("bad URL '{url}': credentials in a URL are not sent (use an authorization header)")));
    }
    let host = authority.host();
    if host.is_empty() {
        return Err(bad(format!("bad URL '{url}': no host")));
    }
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let target = if target.is_empty() { "/" } else { target };
    Ok((Origin { https, host: host.to_ascii_lowercase(), port }, target.to_string()))
}
