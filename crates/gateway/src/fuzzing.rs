//! The gateway's request handling reachable without a TCP socket, for the
//! fuzz targets in `fuzz/` and their regression tests: the mapping of an
//! HTTP request to a service request, the mapping of a service's answer to
//! an HTTP response, and a whole connection served over any byte stream.

use crate::gateway::Gateway;
use crate::names::NameMapping;
use crate::park::IdleConnections;
use crate::request::{query_request, request_info, takes_query};
use crate::response::from_service;
use crate::server::{builder, framing_limits, timeouts, Connection};
use crate::settings::{ErrorDetail, Settings};
use cumulo_proto::{Status, TransId};
use cumulo_service::{Response, ServiceApi};
use std::rc::Rc;
use tokio_util::sync::CancellationToken;

/// What the gateway would send for one HTTP request.
#[derive(Debug)]
pub struct Mapped {
    pub name: String,
    pub request_info: Vec<u8>,
    /// The request of a query-style method (`None` for a body-style one:
    /// its request is the body as sent), or why the query is refused (400).
    pub query_request: Option<Result<Vec<u8>, String>>,
}

/// Maps a request line and headers as the gateway does, or says why hyper
/// would not have accepted them as a request in the first place.
pub fn map_request(
    settings: &toml::Table,
    method: &[u8],
    uri: &[u8],
    headers: &[(&[u8], &[u8])],
) -> Result<Mapped, String> {
    let s = Settings::from_settings(settings)?;
    let mut b = hyper::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let (parts, ()) = b.body(()).map_err(|e| e.to_string())?.into_parts();
    let names = NameMapping { name_prefix: s.name_prefix.clone(), method_suffix: s.method_suffix };
    Ok(Mapped {
        name: names.service_name(&parts.method, parts.uri.path()),
        request_info: request_info(&parts, "127.0.0.1:1", &s.headers),
        query_request: takes_query(&parts.method)
            .then(|| query_request(parts.uri.query().unwrap_or(""), s.query_format)),
    })
}

/// The HTTP status and headers the gateway answers with, for a service's
/// answer of `status` with `response_info` and `body`.
pub fn map_response(status: u16, response_info: &[u8], body: &[u8]) -> (u16, Vec<(String, Vec<u8>)>) {
    let answer = Response {
        trans_id: TransId::default(),
        status: Status::from_code(status),
        response_info: response_info.to_vec(),
        response: body.to_vec(),
    };
    let r = from_service(answer, "/fuzz/get", ErrorDetail::Public);
    let headers = r.headers().iter().map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec())).collect();
    (r.status().as_u16(), headers)
}

/// Serves one HTTP connection over `stream` with a gateway of `settings`
/// registered in `core` under `/http/` (an internal instance), until the
/// connection ends. Call inside a `LocalSet`.
pub async fn serve_connection<A, S>(api: A, settings: &toml::Table, stream: S) -> Result<(), String>
where
    A: ServiceApi + 'static,
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let s = Settings::from_settings(settings)?;
    let gateway = Rc::new(Gateway::new(api, &s, None));
    let idle = Rc::new(IdleConnections::default());
    let conn = Connection {
        gateway,
        http: builder(&s),
        framing: framing_limits(&s),
        timeouts: timeouts(&s),
        open: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(1)),
        idle: idle.clone(),
    };
    // The listener's sweep of idle connections, for this one (park.rs).
    tokio::select! {
        () = conn.serve(stream, "127.0.0.1:1".into(), CancellationToken::new()) => {}
        () = idle.sweep() => {}
    }
    Ok(())
}

/// Parses what a gateway wrote on a WebSocket after its 101: unmasked
/// frames whose lengths fit, as (opcode, payload); or what is wrong.
pub fn server_frames(b: &[u8]) -> Result<Vec<(u8, Vec<u8>)>, String> {
    crate::websocket::server_frames(b)
}

/// Checks a text message the gateway wrote under protocol "id": JSON (by
/// the grammar: a lone surrogate escape such as `"\ud800"` is JSON, though
/// `serde_json::Value` refuses it), an object whose "id" is null, a string
/// or a number, with a "status" string (the answers are written by hand
/// around the service's bytes, not serialized).
pub fn websocket_protocol_answer(text: &[u8]) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
        status: String,
    }
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err("not a JSON object".into());
    }
    let a: Answer<'_> = serde_json::from_slice(text).map_err(|e| format!("not an answer: {e}"))?;
    match a.id.get().as_bytes().first() {
        _ if a.status.is_empty() => Err("an empty \"status\"".into()),
        Some(b'n' | b'"' | b'-' | b'0'..=b'9') => Ok(()),
        _ => Err(format!("\"id\" is {}", a.id.get())),
    }
}

#[cfg(test)]
mod tests {
    use super::websocket_protocol_answer;

    #[test]
    fn protocol_answers_are_checked() {
        assert!(websocket_protocol_answer(br#"{"id":7,"status":"OK","response":{"a":1}}"#).is_ok());
        assert!(websocket_protocol_answer(br#"{"id":null,"status":"BAD_MESSAGE","error":"x"}"#).is_ok());
        for bad in [
            &br#"{"status":"OK"}"#[..],
            br#"{"id":[1],"status":"OK"}"#,
            br#"{"id":true,"status":"OK"}"#,
            br#"{"id":1}"#,
            br#"{"id":1,"status":2}"#,
            br#"{"id":1,"status":""}"#,
            br#"[{"id":1,"status":"OK"}]"#,
            br#"{"id":1,"status":"OK","response":"\u00"}"#,
            b"{\"id\":1,",
            b"text",
        ] {
            assert!(websocket_protocol_answer(bad).is_err(), "{bad:?}");
        }
    }
}
