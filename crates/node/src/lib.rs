//! A node's runtime below the binary: the listener for instances (Unix
//! socket and TCP, TLS on TCP), the supervisor of service processes and
//! internal services, CloudI's protocol for CloudI-protocol services, the
//! shards (`core.threads`), and `InternalApi`, the internal services' door
//! to the router. The binary (crate `cumulo`) wires it with the admin API,
//! the CLI and the catalogue of internal services (`catalogue::set`).

#![forbid(unsafe_code)]

pub mod api;
pub mod catalogue;
#[cfg(any(test, feature = "fuzzing"))]
pub mod cloudi;
#[cfg(not(any(test, feature = "fuzzing")))]
mod cloudi;
pub mod listener;
pub mod runtime;
pub mod shards;
pub mod supervisor;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod test_util;
