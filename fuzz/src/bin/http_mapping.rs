//! Structure-aware: the gateway's mapping of an HTTP request (method, URI,
//! headers, as hyper would accept them) to a service name, request_info and
//! request, and of a service's answer (status, response_info) to an HTTP
//! status and headers. Properties: request_info always parses and ends with
//! the gateway's own five keys; a `kv` query parses; an answer always maps
//! to a status 200..599 and never to a header that contradicts the
//! gateway's framing.
#![no_main]

use arbitrary::Arbitrary;
use cumulo_core::fuzzing::http;
use cumulo_proto::info;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    method: &'a [u8],
    uri: &'a [u8],
    headers: Vec<(&'a [u8], &'a [u8])>,
    name_prefix: bool,
    method_suffix: bool,
    raw_query: bool,
    status: u16,
    response_info: &'a [u8],
}

fuzz_target!(|i: Input| {
    let mut settings = toml::Table::new();
    settings.insert("method_suffix".into(), i.method_suffix.into());
    settings.insert("query_format".into(), if i.raw_query { "raw" } else { "kv" }.into());
    if i.name_prefix {
        settings.insert("name_prefix".into(), "/api".into());
    }
    if let Ok(m) = http::map_request(&settings, i.method, i.uri, &i.headers) {
        if i.name_prefix {
            assert!(m.name.starts_with("/api"), "{}", m.name);
        }
        let pairs = info::parse_all(&m.request_info).expect("request_info is well formed");
        let keys: Vec<&[u8]> = pairs.iter().rev().take(5).rev().map(|(k, _)| *k).collect();
        assert_eq!(keys, [&b"method"[..], b"path", b"query", b"remote_addr", b"http_version"]);
        if let Some(Ok(request)) = &m.query_request {
            if !i.raw_query {
                info::parse_all(request).expect("a kv query is well formed key/value data");
            }
        }
    }
    let (status, headers) = http::map_response(i.status, i.response_info, b"body");
    assert!((200..=599).contains(&status), "{status}");
    for (name, _) in &headers {
        assert!(name != "content-length" && name != "transfer-encoding", "{name}");
    }
    if i.status != 0 {
        assert!(status >= 400, "an error status {} answered {status}", i.status);
    }
});
