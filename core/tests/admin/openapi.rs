//! docs/admin-openapi.json and the server agree: every call in the document
//! is answered by the real core (not 404/405), and every route the server
//! has is in the document.

use crate::common::*;
use cumulo_core::admin::routes::ROUTES;
use serde_json::Value;
use std::collections::BTreeSet;

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

fn documented() -> BTreeSet<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/admin-openapi.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the document is JSON");
    let mut out = BTreeSet::new();
    for (p, item) in doc["paths"].as_object().expect("paths") {
        for (m, op) in item.as_object().unwrap() {
            if METHODS.contains(&m.as_str()) {
                assert!(op["responses"].as_object().is_some_and(|r| !r.is_empty()), "{m} {p} documents no response");
                assert!(op["operationId"].is_string(), "{m} {p} has no operationId");
                out.insert((m.to_uppercase(), p.clone()));
            }
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_servers_routes() {
    let doc = documented();
    let code: BTreeSet<(String, String)> = ROUTES.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    let missing: Vec<_> = code.difference(&doc).collect();
    let extra: Vec<_> = doc.difference(&code).collect();
    assert!(missing.is_empty(), "routes the document does not describe: {missing:?}");
    assert!(extra.is_empty(), "documented calls the server does not have: {extra:?}");
}

#[test]
fn every_documented_call_is_answered_by_the_running_core() {
    // A queue too, so that its calls find one.
    let queue_dir = std::env::temp_dir().join(format!("cumulo-openapi-queue-{}", std::process::id()));
    let core = TestCore::start(&format!(
        "[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n[[service]]\nprefix = \"/q/\"\ninternal = \"queue\"\n\
         settings = {{ dir = \"{}\" }}\n",
        queue_dir.display()
    ));
    // A WebSocket connection open, so that closing connection 1 finds one.
    let _socket = open_websocket(&core);
    // removing the service last, so the other calls find it
    let mut calls: Vec<(String, String)> = documented().into_iter().collect();
    calls.sort_by_key(|(m, _)| m == "DELETE");
    for (method, path) in calls {
        let concrete = path.replace("{id}", "1");
        let r = core.http(&method, &concrete, None);
        assert!(r.status != 404 && r.status != 405 && r.status != 0, "{method} {path}: HTTP {} {}", r.status, r.body);
        if r.headers.to_ascii_lowercase().contains("content-type: application/json") {
            let v: Value = serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e})"));
            if r.status >= 400 {
                assert!(v["code"].is_string() && v["message"].is_string(), "{method} {path}: {v}");
            }
        }
    }
    // and the server serves the very same document
    let served = core.get("/v1/openapi.json");
    assert_eq!(served["info"]["title"], "cumulo admin API");
    drop(core);
    let _ = std::fs::remove_dir_all(queue_dir);
}

/// Adds a gateway with a WebSocket path and opens connection 1 on it.
fn open_websocket(core: &TestCore) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let service = format!(
        r#"{{"prefix": "/ws/", "internal": "http", "settings": {{"port": {port}, "websocket": [{{"path": "/ws/"}}]}}}}"#
    );
    let r = core.http("POST", "/v1/services", Some(&service));
    assert_eq!(r.status, 201, "{}", r.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut s = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("the gateway did not listen: {e}"),
        }
    };
    s.write_all(
        b"GET /ws/a HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 101");
    s
}
