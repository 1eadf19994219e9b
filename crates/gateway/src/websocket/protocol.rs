//! Protocol `"id"`: many calls in flight over one socket. A message in is a
//! JSON object with an `"id"` (a string or a number); it is sent unchanged as
//! the service request, and the answer comes back as
//! `{"id": <id>, "status": "OK", "response": <answer>}`, or with the error
//! instead: `{"id": <id>, "status": "TIMEOUT", "error": "<what happened>"}`.
//! The answer is embedded as JSON if it is JSON, else as a string.
//!
//! Neither the message nor the answer is built into a tree: the message is
//! checked and its id taken as the JSON text the browser wrote, and the
//! answer is written around the service's bytes. A tree per message
//! (`serde_json::Value`, a map of owned strings) was most of what a message
//! cost the gateway in this mode.

use cumulo_proto::Status;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

/// A message's id: its JSON text as sent (`7`, `"a"`), given back as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(Box<str>);

impl RequestId {
    /// The id's JSON text (a string keeps its quotes).
    pub fn as_json(&self) -> &str {
        &self.0
    }
}

/// The id of a message in; or why the message is refused (answered with
/// `"id": null` and status `BAD_MESSAGE`).
pub fn request_id(message: &[u8]) -> Result<RequestId, String> {
    /// The one field looked at; the others are checked to be JSON and
    /// skipped (`IgnoredAny`), with no copy.
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    const NOT_AN_OBJECT: &str = "protocol \"id\": a message must be a JSON object with an \"id\"";
    // serde also reads a struct from a JSON array (`[7]`): only an object is one.
    if message.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(NOT_AN_OBJECT.into());
    }
    let head: Head<'_> = serde_json::from_slice(message).map_err(|e| format!("{NOT_AN_OBJECT}: {e}"))?;
    // (`"id": null` reads as no id.)
    let id = head.id.ok_or("protocol \"id\": the message has no \"id\" (a string or a number)")?;
    match id.get().as_bytes().first() {
        Some(b'"' | b'-' | b'0'..=b'9') => Ok(RequestId(id.get().into())),
        _ => Err("protocol \"id\": \"id\" must be a string or a number".into()),
    }
}

/// The message back for a call's answer.
pub fn answer(id: &RequestId, status: Status, response: &[u8]) -> String {
    let mut out = String::with_capacity(id.0.len() + response.len() + 48);
    out.push_str("{\"id\":");
    out.push_str(&id.0);
    out.push_str(",\"status\":\"");
    out.push_str(status.name());
    if status != Status::Ok {
        out.push_str("\",\"error\":");
        push_json_string(&mut out, &String::from_utf8_lossy(response));
    } else {
        out.push_str("\",\"response\":");
        if response.is_empty() {
            out.push_str("null");
        } else {
            match std::str::from_utf8(response) {
                Ok(text) if serde_json::from_str::<IgnoredAny>(text).is_ok() => out.push_str(text),
                Ok(text) => push_json_string(&mut out, text),
                Err(_) => push_json_string(&mut out, &String::from_utf8_lossy(response)),
            }
        }
    }
    out.push('}');
    out
}

/// The message back for a message refused before any request was sent.
pub fn refused(why: &str) -> String {
    let mut out = String::from("{\"id\":null,\"status\":\"BAD_MESSAGE\",\"error\":");
    push_json_string(&mut out, why);
    out.push('}');
    out
}

/// `text` as a JSON string literal.
fn push_json_string(out: &mut String, text: &str) {
    // A str always serializes.
    out.push_str(&serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn id(text: &str) -> RequestId {
        request_id(text.as_bytes()).unwrap()
    }

    #[test]
    fn ids_are_strings_or_numbers_as_written() {
        assert_eq!(id(r#"{"id": 7, "op": "add"}"#).as_json(), "7");
        assert_eq!(id(r#" {"op": {"deep": [1, 2]}, "id": "a"}"#).as_json(), r#""a""#);
        assert_eq!(id(r#"{"id": -1.50}"#).as_json(), "-1.50");
        assert_eq!(id(r#"{"id": "\u0041"}"#).as_json(), r#""\u0041""#);
        for bad in [
            &b"[1]"[..],
            b"{}",
            br#"{"id": null}"#,
            b"nope",
            b"\xff",
            br#"{"id": [1]}"#,
            br#"{"id": true}"#,
            br#"{"id": {"x": 1}}"#,
            br#"{"id": 1} trailing"#,
            br#"{"id": 1, "bad": }"#,
            br#"{"id": 1, "id": 2}"#,
            b"",
        ] {
            assert!(request_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn answers_embed_json_or_text() {
        let parse = |s: String| serde_json::from_str::<Value>(&s).unwrap();
        let a = parse(answer(&id(r#"{"id":1}"#), Status::Ok, br#"{"sum": 3}"#));
        assert_eq!(a, json!({"id": 1, "status": "OK", "response": {"sum": 3}}));
        let a = parse(answer(&id(r#"{"id":"x"}"#), Status::Ok, b"plain \"quoted\"\n"));
        assert_eq!(a["response"], "plain \"quoted\"\n");
        assert_eq!(a["id"], "x");
        let a = parse(answer(&id(r#"{"id":2}"#), Status::Ok, b""));
        assert_eq!(a["response"], Value::Null);
        let a = parse(answer(&id(r#"{"id":2}"#), Status::Ok, b"\xffbytes"));
        assert_eq!(a["response"], "\u{fffd}bytes");
        let a = parse(answer(&id(r#"{"id":3}"#), Status::NoService, b"nobody"));
        assert_eq!(a, json!({"id": 3, "status": "NO_SERVICE", "error": "nobody"}));
        // the id first, as a client scanning for it expects, and as written
        assert!(answer(&id(r#"{"id":42}"#), Status::Ok, b"1").starts_with(r#"{"id":42,"#));
        assert!(answer(&id(r#"{"id": 7.50}"#), Status::Ok, b"1").starts_with(r#"{"id":7.50,"#));
        // a JSON answer byte for byte (key order and spacing kept)
        let raw = r#"{"b": 1,  "a": [2]}"#;
        assert_eq!(
            answer(&id(r#"{"id":1}"#), Status::Ok, raw.as_bytes()),
            format!(r#"{{"id":1,"status":"OK","response":{raw}}}"#)
        );
    }

    #[test]
    fn lone_surrogate_escapes_are_json_and_pass_through() {
        // RFC 8259 allows them in the grammar (browsers' JSON.parse takes
        // them); serde_json's Value does not, which is why the message is
        // not parsed into one.
        let message = r#"{"id":1,"x":"\ud800"}"#;
        let a = answer(&id(message), Status::Ok, message.as_bytes());
        assert_eq!(a, format!(r#"{{"id":1,"status":"OK","response":{message}}}"#));
        assert!(crate::fuzzing::websocket_protocol_answer(a.as_bytes()).is_ok());
    }

    #[test]
    fn refusals_are_json_with_a_null_id() {
        let r: Value = serde_json::from_str(&refused("bad \"thing\"")).unwrap();
        assert_eq!(r, json!({"id": null, "status": "BAD_MESSAGE", "error": "bad \"thing\""}));
    }
}
