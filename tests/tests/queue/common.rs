//! What the queue tests share: a queue service's table, a recording
//! destination, and reading what it recorded.

use cumulo::{Answer, Request};
use cumulo_e2e::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// An `internal = "queue"` service at `prefix` with these settings (TOML
/// key = value pairs, `dir` first).
pub fn queue(prefix: &str, dir: &Path, settings: &[(&str, String)]) -> Service {
    let mut pairs = vec![format!("dir = {}", q(dir.to_str().unwrap()))];
    pairs.extend(settings.iter().map(|(k, v)| format!("{k} = {v}")));
    Service::internal(prefix, "queue").set("settings", format!("{{ {} }}", pairs.join(", ")))
}

/// The test service at `prefix`, appending every request body it gets to
/// `file`, one line each.
#[macro_export]
macro_rules! recorder {
    ($prefix:expr, $file:expr) => {
        cumulo_e2e::ts!($prefix).env("TS_RECORD", $file.display())
    };
}

/// The lines recorded so far, each with how many times it was seen.
pub fn recorded(file: &Path) -> HashMap<String, u32> {
    let mut seen = HashMap::new();
    for line in std::fs::read_to_string(file).unwrap_or_default().lines() {
        *seen.entry(line.to_string()).or_insert(0) += 1;
    }
    seen
}

/// `GET /v1/queues` through the CLI, as JSON: the queue at `prefix`.
pub fn queue_view(core: &Core, port: u16, prefix: &str) -> serde_json::Value {
    let out = core.admin_cmd(port, &["queues", "--output", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["queues"]
        .as_array()
        .and_then(|l| l.iter().find(|q| q["prefix"] == prefix).cloned())
        .unwrap_or_else(|| panic!("no queue {prefix} in {v}"))
}

/// Waits until `cond` holds, polling every 50 ms, or panics with `what`.
pub fn wait_until(what: &str, limit: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(ms(50));
    }
}

/// What an unmanaged subscriber received: name, request_info, body.
pub type Got = Rc<RefCell<Vec<(String, HashMap<String, String>, Vec<u8>)>>>;

/// An unmanaged client subscribed to `*` under `prefix`, answering OK.
pub fn subscriber(core: &Core, prefix: &str) -> (Api, Got) {
    let mut api = core.client_with_prefix(prefix);
    let got: Got = Rc::default();
    let g = got.clone();
    api.subscribe("*", move |_, req: &Request<'_>| {
        g.borrow_mut().push((req.name.to_string(), info(req.request_info), req.request.to_vec()));
        Ok(Answer::body(b"taken".to_vec()))
    })
    .unwrap();
    (api, got)
}

/// Polls `api` until `got` holds `n` requests.
pub fn poll_until(api: &mut Api, got: &Got, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while got.borrow().len() < n {
        assert!(Instant::now() < deadline, "got {} of {n} requests within {limit:?}", got.borrow().len());
        api.poll(Some(ms(50))).unwrap();
    }
}
