//! The core's end-to-end suite: the real cumulo binary, real service
//! processes and real sockets, one module per feature. One test binary, so
//! the suite links once.

mod cli;
mod counts;
mod crash;
mod faults;
mod forward;
mod handshake;
mod keepalive;
mod limits;
mod malformed;
mod mcast;
mod names;
mod no_service;
mod priority;
mod queue_bytes;
mod queue_limit;
mod reload;
mod resiliency_admin;
mod restart;
mod send_async;
mod send_sync;
mod service_error;
mod shutdown;
mod subscriptions;
mod timeout;
mod tls;
mod trust;
mod wait_for_service;
mod wildcard;
mod window;
