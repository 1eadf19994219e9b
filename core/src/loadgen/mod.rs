//! The load generator: what `cumulo bench` and the `request_rate` internal
//! service share.
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

pub mod answer;
pub mod bench_report;
pub mod cli;
pub mod controller;
pub mod driver;
pub mod html;
pub mod http_client;
pub mod moments;
mod own_core;
pub mod payload;
pub mod progress;
pub mod recorder;
pub mod report;
pub mod schedule;
pub mod service_client;
pub mod shape;
pub mod svg;
