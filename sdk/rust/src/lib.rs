//! Write cumulo services in Rust.
//!
//! ```no_run
//! use cumulo::{Answer, Api};
//!
//! cumulo::run(|api: &mut Api| {
//!     api.subscribe("hello/get", |_api, req| {
//!         Ok(Answer::body(format!("hello, {}", String::from_utf8_lossy(req.request))))
//!     })
//! })
//! .unwrap();
//! ```
//!
//! An [`Api`] is one instance: one connection to the core, used by one
//! thread. [`run`] starts the `CUMULO_THREAD_COUNT` threads the core asked
//! for, each with its own instance, and polls until the core terminates them
//! (TERMINATE makes [`Api::poll`] return `Ok(false)`). The protocol is
//! specified in `proto/PROTOCOL.md`; the calls every SDK offers in
//! `docs/SDK_GUIDE.md`.
#![forbid(unsafe_code)]

mod api;
mod conn;
mod error;
mod inbox;
#[cfg(feature = "otel")]
pub mod otel;
mod run;
mod send;
mod serve;
#[cfg(test)]
mod tests;
mod tls;
mod trace;

pub use api::{Answer, Api, HandlerResult, Options, Request, Response, SendOptions};
pub use cumulo_proto::{info, Status, TransId};
pub use error::{Error, Result};
pub use run::{run, run_with_window};
pub use tls::TlsFiles;

/// Decodes one frame (type byte and body). Every frame the SDK reads goes
/// through here exactly once; the tests count the calls to check that.
fn decode_frame(frame: &[u8]) -> Result<cumulo_proto::Frame<'_>> {
    #[cfg(test)]
    tests::count_decode();
    cumulo_proto::decode(frame).map_err(|e| Error::Protocol(e.to_string()))
}
