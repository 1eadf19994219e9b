//! Services built into the core, end to end: the real cumulo binary with
//! the service in its config, real instances receiving what it sends. One
//! module per service.

mod cron;
