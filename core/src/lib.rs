//! cumulo: the binary that wires the crates into a daemon, and its CLI.
//!
//! Module map (docs/ARCHITECTURE.md opens with the crate graph; the router,
//! the node runtime, the admin API, the gateway and every internal service
//! are crates of their own):
//! - `daemon`: binds the listeners, starts the services, runs the event loop;
//! - `internal`: the catalogue of internal services (each a crate reached
//!   through the service API), and `echo`;
//! - `traces`: the span exporter of `[tracing]`, started before the shards;
//! - `cli`: the client commands that talk to the admin API;
//! - `fuzzing`: the socket and HTTP paths over in-memory streams, for `fuzz/`.
#![forbid(unsafe_code)]

/// The admin API is a crate of its own; the binary and tests reach it here.
pub use cumulo_admin as admin;
pub mod cli;
/// CloudI's term decoder and messages, for the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
pub use cumulo_node::cloudi;

pub mod daemon;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod internal;
mod traces;
