//! What cumulo needs of the operating system beyond the standard library
//! and tokio (`os`: the only module of the workspace allowed `unsafe`, a
//! SAFETY comment on every block), and a throttle for warnings that can
//! repeat thousands of times a second.

mod log_throttle;
mod os;

pub use log_throttle::{Throttle, WARN_EVERY};
pub use os::{
    bytes_waiting, clock_ticks_per_second, die_with_parent, page_size, pass_fds, random_bytes, signal, trim_heap,
};
