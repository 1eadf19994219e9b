//! Protocol `"id"`: many calls in flight over one socket. A message in is a
//! JSON object with an `"id"` (a string or a number); it is sent unchanged as
//! the service request, and the answer comes back as
//! `{"id": <id>, "status": "OK", "response": <answer>}`, or with the error
//! instead: `{"id": <id>, "status": "TIMEOUT", "error": "<what happened>"}`.
//! The answer is embedded as JSON if it is JSON, else as a string.

use cumulo_proto::Status;
use serde_json::{json, Value};

/// The id of a message in, as JSON text; or why the message is refused
/// (answered with `"id": null` and status `BAD_MESSAGE`).
pub fn request_id(message: &[u8]) -> Result<Value, String> {
    let v: Value = serde_json::from_slice(message)
        .map_err(|e| format!("protocol \"id\": a message must be a JSON object with an \"id\": {e}"))?;
    match v.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => Ok(id.clone()),
        Some(_) => Err("protocol \"id\": \"id\" must be a string or a number".into()),
        None if v.is_object() => Err("protocol \"id\": the message has no \"id\"".into()),
        None => Err("protocol \"id\": a message must be a JSON object with an \"id\"".into()),
    }
}

/// The message back for a call's answer.
pub fn answer(id: &Value, status: Status, response: &[u8]) -> String {
    if status != Status::Ok {
        let error = String::from_utf8_lossy(response);
        return json!({ "id": id, "status": status.name(), "error": error }).to_string();
    }
    let response = if response.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(response) {
            Ok(v) => v,
            Err(_) => Value::String(String::from_utf8_lossy(response).into_owned()),
        }
    };
    json!({ "id": id, "status": "OK", "response": response }).to_string()
}

/// The message back for a message refused before any request was sent.
pub fn refused(why: &str) -> String {
    json!({ "id": null, "status": "BAD_MESSAGE", "error": why }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strings_or_numbers() {
        assert_eq!(request_id(br#"{"id": 7, "op": "add"}"#).unwrap(), json!(7));
        assert_eq!(request_id(br#"{"id": "a"}"#).unwrap(), json!("a"));
        for bad in [&b"[1]"[..], b"{}", br#"{"id": null}"#, b"nope", b"\xff", br#"{"id": [1]}"#] {
            assert!(request_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn answers_embed_json_or_text() {
        let a: Value = serde_json::from_str(&answer(&json!(1), Status::Ok, br#"{"sum": 3}"#)).unwrap();
        assert_eq!(a, json!({"id": 1, "status": "OK", "response": {"sum": 3}}));
        let a: Value = serde_json::from_str(&answer(&json!("x"), Status::Ok, b"plain")).unwrap();
        assert_eq!(a["response"], "plain");
        let a: Value = serde_json::from_str(&answer(&json!(2), Status::Ok, b"")).unwrap();
        assert_eq!(a["response"], Value::Null);
        let a: Value = serde_json::from_str(&answer(&json!(3), Status::NoService, b"nobody")).unwrap();
        assert_eq!(a, json!({"id": 3, "status": "NO_SERVICE", "error": "nobody"}));
    }
}
