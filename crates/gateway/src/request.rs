//! HTTP request → service request: the payload (query or body) and the
//! request_info (key/value encoded: headers, then what the gateway knows).

use super::settings::{HeaderFilter, QueryFormat};
use cumulo_proto::info;
use hyper::http::request::Parts;
use hyper::{Method, Version};

/// Keys the gateway sets itself. A client header of the same name is not
/// passed on, so a service can trust `remote_addr` and friends.
const GATEWAY_KEYS: [&str; 5] = ["method", "path", "query", "remote_addr", "http_version"];

/// GET, HEAD and DELETE carry their arguments in the query; every other
/// method in the body.
pub fn takes_query(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::DELETE)
}

/// The request_info of a service request: the passed headers (lower-case
/// names, as HTTP/1 gives them to hyper), then the gateway's own keys;
/// nothing else (whether a file may be streamed back is known from the
/// sender, crates/filesystem/src/stream.rs).
/// `traceparent` is a header like any other and passes unchanged.
/// `remote` is the client's `ip:port`, formatted once per connection.
pub fn request_info(parts: &Parts, remote: &str, filter: &HeaderFilter) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if filter.passes(name) && !GATEWAY_KEYS.contains(&name) {
            // HTTP forbids NUL in header values and hyper rejects it, so the
            // encoding cannot be broken by a client.
            info::push(&mut out, name.as_bytes(), value.as_bytes());
        }
    }
    info::push(&mut out, b"method", parts.method.as_str().as_bytes());
    info::push(&mut out, b"path", parts.uri.path().as_bytes());
    info::push(&mut out, b"query", parts.uri.query().unwrap_or("").as_bytes());
    info::push(&mut out, b"remote_addr", remote.as_bytes());
    info::push(&mut out, b"http_version", version_name(parts.version).as_bytes());
    out
}

fn version_name(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

/// The service request of a query-style method.
pub fn query_request(query: &str, format: QueryFormat) -> Result<Vec<u8>, String> {
    match format {
        QueryFormat::Raw => Ok(query.as_bytes().to_vec()),
        QueryFormat::KeyValue => query_to_key_value(query),
    }
}

/// `a=1&b=x%20y&flag` → `a\01\0b\0x y\0flag\0\0`: URL-decoded (`+` is a
/// space), order and repeated keys kept, empty segments skipped.
pub fn query_to_key_value(query: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(query.len() + 8);
    for segment in query.split('&').filter(|s| !s.is_empty()) {
        let (key, value) = segment.split_once('=').unwrap_or((segment, ""));
        let nul_in_key = url_decode_into(&mut out, key.as_bytes());
        out.push(0);
        let nul_in_value = url_decode_into(&mut out, value.as_bytes());
        out.push(0);
        if nul_in_key || nul_in_value {
            return Err(format!("the query parameter '{key}' holds an encoded NUL (%00), which cannot be passed on"));
        }
    }
    Ok(out)
}

/// Appends the URL-decoded `s`; returns whether it decoded to a NUL byte.
/// A `%` not followed by two hex digits is kept as it is, as browsers do.
fn url_decode_into(out: &mut Vec<u8>, s: &[u8]) -> bool {
    let mut has_nul = false;
    let mut i = 0;
    while i < s.len() {
        let byte = match s[i] {
            b'+' => b' ',
            b'%' if i + 2 < s.len() => match (hex(s[i + 1]), hex(s[i + 2])) {
                (Some(hi), Some(lo)) => {
                    i += 2;
                    hi << 4 | lo
                }
                _ => b'%',
            },
            other => other,
        };
        has_nul |= byte == 0;
        out.push(byte);
        i += 1;
    }
    has_nul
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_becomes_key_value() {
        assert_eq!(query_to_key_value("value=42").unwrap(), b"value\x0042\x00");
        assert_eq!(query_to_key_value("a=1&&b=x%20y+z&flag").unwrap(), b"a\x001\x00b\x00x y z\x00flag\x00\x00");
        assert_eq!(query_to_key_value("k=%e2%82%AC&k=2").unwrap(), "k\0€\0k\x002\0".as_bytes());
        assert_eq!(query_to_key_value("").unwrap(), b"");
    }

    #[test]
    fn bad_escapes_are_kept_and_nul_is_refused() {
        assert_eq!(query_to_key_value("p=100%&q=%zz&r=%4").unwrap(), b"p\x00100%\x00q\x00%zz\x00r\x00%4\x00");
        assert!(query_to_key_value("x=%00").is_err());
    }

    #[test]
    fn raw_query_is_kept() {
        assert_eq!(query_request("a=%20&b", QueryFormat::Raw).unwrap(), b"a=%20&b");
    }

    #[test]
    fn request_info_has_headers_then_gateway_keys() {
        let req = hyper::Request::builder()
            .method("POST")
            .uri("/a/b?x=1")
            .header("Content-Type", "text/plain")
            .header("remote_addr", "spoofed")
            .header("traceparent", "00-abc-def-01")
            .body(())
            .unwrap();
        let (parts, _) = req.into_parts();
        let remote = "127.0.0.1:5555";
        let buf = request_info(&parts, remote, &HeaderFilter::All);
        let pairs = info::parse_all(&buf).unwrap();
        let text: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (String::from_utf8_lossy(k).into(), String::from_utf8_lossy(v).into())).collect();
        let want = [
            ("content-type", "text/plain"),
            ("traceparent", "00-abc-def-01"),
            ("method", "POST"),
            ("path", "/a/b"),
            ("query", "x=1"),
            ("remote_addr", "127.0.0.1:5555"),
            ("http_version", "HTTP/1.1"),
        ];
        assert_eq!(text, want.map(|(k, v)| (k.to_string(), v.to_string())));
        let only = request_info(&parts, remote, &HeaderFilter::Only(vec!["traceparent".into()]));
        assert_eq!(info::get(&only, b"content-type"), None);
        assert_eq!(info::get(&only, b"traceparent"), Some(&b"00-abc-def-01"[..]));
    }
}
