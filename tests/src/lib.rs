//! End-to-end test harness for the cumulo core: writes a config into a fresh
//! folder, runs the real `cumulo` binary on it, waits for its services, and
//! gives tests unmanaged clients, raw sockets and the core's log.

pub mod config;
pub mod harness;
pub mod load;
pub mod nats;
pub mod raw;

pub use config::{cluster_node, q, Config, Service, CLUSTER_HEARTBEAT_MS};
pub use cumulo::{Api, Error, Options, Response, SendOptions, Status};
pub use harness::{admin_get, cumulo_bin, cumulo_cmd, free_port, Core, TempDir};
pub use load::{Load, LoadReport};
pub use nats::{NatsCluster, NatsServer};

use std::collections::HashMap;
use std::time::Duration;

/// A `[[service]]` running this package's `test_service` binary (the path
/// is only known to integration tests, hence a macro).
#[macro_export]
macro_rules! ts {
    ($prefix:expr) => {
        $crate::Service::test_service($prefix, env!("CARGO_BIN_EXE_test_service"))
    };
}

/// The status of a call's outcome (`Ok` for a success).
pub fn status<T>(r: &cumulo::Result<T>) -> Status {
    match r {
        Ok(_) => Status::Ok,
        Err(e) => e.status().unwrap_or_else(|| panic!("not a status error: {e}")),
    }
}

/// The key/value pairs of a response_info.
pub fn info(buf: &[u8]) -> HashMap<String, String> {
    cumulo::info::parse_all(buf)
        .expect("well-formed response_info")
        .into_iter()
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

/// One value of a response_info, as the test_service reports it.
pub fn field(r: &Response, key: &str) -> String {
    info(&r.info).remove(key).unwrap_or_else(|| panic!("no '{key}' in response_info {:?}", info(&r.info)))
}

pub fn opts(timeout_ms: u32) -> SendOptions {
    SendOptions { timeout: timeout_ms, ..Default::default() }
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
