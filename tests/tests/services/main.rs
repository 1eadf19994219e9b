//! Internal services of the platform end to end: the real core, real
//! servers on loopback, called by name through the Rust SDK.

mod health_check;
mod http_client;
