//! The load generator: `cumulo bench` and the `request_rate` internal
//! service, which share everything below.
//!
//! - `schedule`: open-loop pacing (when each request is due) over lanes;
//! - `recorder`: outcomes per tick, per second and in total;
//! - `controller`: the dynamic search for the highest stable rate;
//! - `driver`: the tick loop tying pace, recorder and controller together;
//! - `moments`, `shape`, `report`: the latency report (exact moments, plain
//!   words, HDR percentiles) in CloudI's layout;
//! - `service_client`, `http_client`: the senders of `cumulo bench`;
//! - `progress`, `bench_report`, `html`, `svg`: what `cumulo bench` shows
//!   and writes; `cli`: its command line.

mod answer;
mod bench_report;
mod cli;
mod controller;
mod driver;
mod html;
mod http_client;
mod moments;
mod own_core;
mod payload;
mod progress;
mod recorder;
mod report;
mod request_rate;
mod schedule;
mod service_client;
mod shape;
mod svg;

pub use cli::{main, BenchArgs, SocketOfConfig};
pub use request_rate::{check_settings as check_request_rate_settings, RequestRate};
