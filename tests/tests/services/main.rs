//! The internal services built as crates of their own, end to end: the
//! real core, real servers and sockets on loopback, called by name through
//! the Rust SDK.

mod bridge;
mod chaos;
mod cron;
mod health_check;
mod http_client;
mod resiliency;
