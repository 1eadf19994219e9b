//! At most one warning per interval for a condition that can repeat
//! thousands of times a second (failed accepts at the open-files limit,
//! refused connections): a flood must not become a log flood. Each warning
//! says how many occurrences it stands for.

use std::time::{Duration, Instant};

/// The interval between two warnings of one throttle.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct Throttle {
    last: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    /// Counts one occurrence; logs `message(count since the last warning)`
    /// unless a warning went out less than `WARN_EVERY` ago.
    pub fn warn(&mut self, message: impl FnOnce(u64) -> String) {
        self.held_back += 1;
        let now = Instant::now();
        if self.last.is_some_and(|t| now.duration_since(t) < WARN_EVERY) {
            return;
        }
        tracing::warn!("{}", message(self.held_back));
        self.last = Some(now);
        self.held_back = 0;
    }
}
