//! Helpers for the tests and fuzz targets of the crates built on the router
//! (feature `test-util`).

use crate::state::Limits;
use std::time::Duration;

/// Limits small enough that a fuzzer reaches them.
pub fn small_limits() -> Limits {
    Limits {
        node_id: 1,
        max_frame: 64 * 1024,
        max_outbox: 1024 * 1024,
        max_parked: 64,
        max_queued_bytes: 1024 * 1024,
        max_sender_queued_bytes: 512 * 1024,
        names: cumulo_pattern::NameLimits { max_name: 256, max_pattern: 256, max_wildcards: 8 },
        max_subscriptions: 64,
        hello_timeout: Duration::from_secs(10),
        keepalive: Duration::from_secs(5),
        max_connections: 16,
        allow_unmanaged: true,
        tcp_anonymous: cumulo_config::Anonymous::Any,
        unix_anonymous: cumulo_config::Anonymous::Any,
        spread_instances: true,
    }
}
