//! CloudI's external-service protocol: a service written against one of
//! CloudI's language APIs (`protocol = "cloudi"` in its `[[service]]`) runs
//! on cumulo unchanged. The supervisor hands each of its threads one end of a
//! socket pair as file descriptor 3 + thread index and CloudI's `CLOUDI_API_*`
//! environment; each connection becomes an instance with window 1 (see
//! docs/CLOUDI.md).
//!
//! - `etf`: the Erlang term decoder for what the APIs send;
//! - `messages`: CloudI's messages, decoded (API → core) and encoded (core → API);
//! - `connection`: one socket adapted to the core's operations;
//! - CloudI's routing rules for what its services send are the router's
//!   (`cumulo_router::rules`).

pub mod connection;
pub mod etf;
pub mod messages;

/// Bytes the APIs read per `recv` (`CLOUDI_API_INIT_BUFFER_SIZE`): CloudI's
/// default buffer size.
pub const BUFFER_SIZE: u32 = 65536;
