//! cumulo core: the daemon that starts, supervises and connects services.
//!
//! Module map (see docs/ARCHITECTURE.md; the config, names and patterns,
//! the OS calls, the load generator and the queue are crates of their own):
//! - `registry`: who subscribes what;
//! - `state`, `routing`, `queue`, `instance`: requests in flight, queues,
//!   windows, timeouts — the hot path;
//! - `shards`: the core on several threads (other shards as pseudo-instances);
//! - `cloudi`: CloudI's external-service protocol, for unmodified CloudI services;
//! - `listener`: sockets, handshake, frame reading and batched writing;
//! - `frames`: every frame the core writes, one encoder per kind;
//! - `supervisor`: service processes, restarts, termination;
//! - `internal`: services inside the core behind one trait;
//! - `admin`: the HTTP/JSON admin API and `/metrics`;
//! - `cli`: the client commands that talk to the admin API;
//! - `fuzzing`: the socket and HTTP paths over in-memory streams, for `fuzz/`;
//! - `daemon`: wires the parts together and runs the event loop.
#![forbid(unsafe_code)]

pub mod admin;
pub mod cli;
/// CloudI's term decoder and messages, for the fuzz targets.
#[cfg(any(test, feature = "fuzzing"))]
pub use cumulo_node::cloudi;

pub mod daemon;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod internal;
mod reload;
