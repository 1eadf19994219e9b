//! The `queue` internal service: a request sent to `<prefix><name>` is
//! written to a write-ahead log on local disk (`cumulo-wal`), acknowledged,
//! then delivered to `/<name>` at least once: retried on the failures that
//! say it was not done, across restarts of the core, until it is answered,
//! runs out of attempts (then it becomes a dead letter) or its deadline
//! passes. docs/QUEUE.md is the user's guide; GUARANTEES.md says what each
//! sync mode promises.
//!
//! Layout: `settings` (the `[service.settings]` table), `record` (what the
//! log holds), `store` (the queue's state in memory and its log), `intake`
//! (a request arrives), `delivery` (attempts, retries, dead letters),
//! `report` (the admin API's view, metrics, purge and replay).
//!
//! It sees the core only through `cumulo-service`; naming the core does not
//! compile (its manifest does not list it; `core/tests/architecture.rs` checks
//! the whole dependency graph):
//!
//! ```compile_fail
//! use cumulo_core::state::Core;
//! ```
#![deny(unsafe_code)]

mod backoff;
mod delivery;
mod intake;
mod record;
mod report;
mod service;
mod settings;
mod store;

pub use service::Queue;
pub use settings::{check_settings, Backend, Backoff, Mode, Settings, Sync};

/// What every backend of the queue shares: how a request is checked and
/// read, what an attempt's answer does to it, and the request_info of
/// deliveries, replies and dead letters (docs/QUEUE.md). The file backend
/// is this crate; another backend (JetStream) builds on these.
pub mod shared {
    pub use crate::delivery::{
        attempt_timeout, dead_letter_info, delivery_info, history, reply_info, send_reply, verdict, Verdict,
    };
    pub use crate::intake::{prepare, Prepared};
    pub use crate::record::{Failure, Reader, Writer};
    pub use crate::service::status_name;
    pub use crate::store::now_ms;
}

#[cfg(test)]
mod tests;
