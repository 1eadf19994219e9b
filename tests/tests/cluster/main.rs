//! cumulo nodes forming one cloud over NATS: real `cumulo` binaries, real
//! `nats-server` processes, real sockets. One module per concern.

mod common;
mod faults;
mod limits;
mod membership;
mod permissions;
mod resiliency;
mod routing;
