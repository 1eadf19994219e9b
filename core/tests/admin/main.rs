//! End-to-end tests of the admin API, the CLI and the metrics, against the
//! real cumulo binary. One test binary, so the suite links once.

mod auth;
mod cli;
mod common;
mod connections;
mod counters;
mod gateway_shards;
mod logs;
mod metrics;
mod openapi;
mod port;
mod reroute_clock;
mod service_shards;
mod services;
mod shard_view;
mod shutdown;
