//! Faulty service: /tests/faulty/rust/boom panics, /ok answers "ok". The
//! SDK must answer the panic with SERVICE_ERROR and keep serving.
//! The trace_* handlers call the echo service with an empty request_info
//! and answer with the request_info the echo saw: the trace context the SDK
//! passed on (PROTOCOL.md 5.1).

use cumulo::{Answer, Api, Error, Response, SendOptions};
use std::time::Duration;

const ECHO: &str = "/echo/trace";

/// The answer of a send_async or mcast_async copy, collected with recv_async.
fn collected(api: &mut Api, tid: cumulo::TransId) -> Result<Response, Error> {
    match api.recv_async(Some(tid), Duration::from_secs(10))? {
        Some((_, answer)) => answer,
        None => Err(Error::Protocol("no answer from the echo".into())),
    }
}

fn main() {
    let result = cumulo::run(|api: &mut Api| {
        api.subscribe("boom", |_, _| panic!("boom from rust"))?;
        api.subscribe("ok", |_, _| Ok(Answer::body("ok")))?;
        api.subscribe("trace_sync", |api, _| {
            let echoed = api.send_sync(ECHO, b"", b"", SendOptions::default())?;
            Ok(Answer::body(echoed.info))
        })?;
        api.subscribe("trace_async", |api, _| {
            let tid = api.send_async(ECHO, b"", b"", SendOptions::default());
            Ok(Answer::body(collected(api, tid)?.info))
        })?;
        api.subscribe("trace_mcast", |api, _| {
            let tids = api.mcast_async(ECHO, b"", b"", SendOptions::default())?;
            let first = *tids.first().ok_or_else(|| Error::Protocol("mcast_async reached nobody".into()))?;
            Ok(Answer::body(collected(api, first)?.info))
        })?;
        api.subscribe("trace_forward", |_, req| Ok(Answer::forward(ECHO, Vec::new(), req.request.to_vec())))
    });
    if let Err(e) = result {
        eprintln!("faulty: {e}");
        std::process::exit(1);
    }
}
