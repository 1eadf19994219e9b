//! Running a whole service process: one thread per instance the core asked
//! for (`CUMULO_THREAD_COUNT`), each connecting, subscribing through the
//! user's setup, and polling until TERMINATE.

use crate::api::{Api, Options};
use crate::error::{Error, Result};

/// Runs `setup` then the event loop on each of the process's instances;
/// returns when every instance was terminated (or the first error).
pub fn run<F>(setup: F) -> Result<()>
where
    F: Fn(&mut Api) -> Result<()> + Send + Sync + 'static,
{
    run_with_window(1, setup)
}

/// As [`run`], with each instance asking for a window of `window` requests
/// delivered at once (pipelined: handled in order, without a round trip
/// between them).
pub fn run_with_window<F>(window: u32, setup: F) -> Result<()>
where
    F: Fn(&mut Api) -> Result<()> + Send + Sync + 'static,
{
    let threads: u32 = std::env::var("CUMULO_THREAD_COUNT").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
    let setup = std::sync::Arc::new(setup);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let setup = setup.clone();
            std::thread::Builder::new()
                .name(format!("cumulo-instance-{t}"))
                .spawn(move || -> Result<()> {
                    let mut api = Api::connect(Options { window, ..Options::from_env(t)? })?;
                    setup(&mut api)?;
                    while api.poll(None)? {}
                    Ok(())
                })
                .expect("spawn instance thread")
        })
        .collect();
    let mut first = Ok(());
    for h in handles {
        let r = h.join().unwrap_or_else(|_| Err(Error::Protocol("an instance thread panicked".into())));
        if first.is_ok() {
            first = r;
        }
    }
    first
}
