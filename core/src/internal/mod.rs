//! Internal services: services that run inside the core, on its event loop,
//! behind one trait and with the same calls as external instances
//! (subscribe, send_async, send_sync, mcast_async, recv_async, return,
//! forward). The HTTP gateway and the load generator are built on it.

mod api;
mod echo;
mod http;
mod request_rate;

pub use api::InternalApi;
/// The gateway's entry points for fuzz targets and tests (see `crate::fuzzing`).
#[doc(hidden)]
pub use http::fuzzing as http_fuzzing;
pub use http::share_ports_across_shards;

use std::future::Future;
use std::pin::Pin;

/// Names accepted in `internal = "..."`.
pub const KNOWN: &[&str] = &["echo", "http", "request_rate"];

pub fn is_known(name: &str) -> bool {
    KNOWN.contains(&name)
}

/// A service built into the core. One value is created per instance
/// (count_process x count_thread of them); `run` owns its instance's API
/// until the core stops.
pub trait InternalService {
    fn run(self: Box<Self>, api: InternalApi) -> Pin<Box<dyn Future<Output = ()>>>;
}

/// Creates one instance of the internal service `name` from its settings.
pub fn create(name: &str, settings: &toml::Table) -> Result<Box<dyn InternalService>, String> {
    match name {
        "echo" => Ok(Box::new(echo::Echo::from_settings(settings)?)),
        "http" => Ok(Box::new(http::HttpGateway::from_settings(settings)?)),
        "request_rate" => Ok(Box::new(request_rate::RequestRate::from_settings(settings)?)),
        other => Err(format!("unknown internal service '{other}' (known: {})", KNOWN.join(", "))),
    }
}

/// Checks the settings of an internal service without creating it (no
/// socket bound, nothing started): for validating a config file.
pub fn check_settings(name: &str, settings: &toml::Table) -> Result<(), String> {
    match name {
        "echo" => echo::Echo::from_settings(settings).map(drop),
        "http" => http::check_settings(settings),
        "request_rate" => request_rate::RequestRate::from_settings(settings).map(drop),
        other => Err(format!("unknown internal service '{other}' (known: {})", KNOWN.join(", "))),
    }
}
