//! The durable queue service end to end: the real core (killed with
//! SIGKILL where the test says so), real service processes that record
//! every request they get, and the queue's log on a real disk.

mod common;
mod delivery;
mod disk;
mod jetstream;
mod kill;
