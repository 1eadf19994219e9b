//! Runtimes for the fuzz targets and tests: a current-thread runtime inside
//! a `LocalSet`, with a paused clock (`run`) or the real one.

pub use cumulo_router::test_util::small_limits;

/// Runs `f` on a fresh current-thread runtime with a paused clock, inside a
/// `LocalSet`. The paused clock needs tokio's `test-util`, which the
/// `fuzzing` feature turns on; it stays off in the daemon's build because it
/// puts a lock on every clock read.
pub fn run<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}

/// As `run`, on the real clock (tests with real sockets and threads).
pub fn run_unpaused<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a current-thread runtime");
    tokio::task::LocalSet::new().block_on(&rt, f)
}
