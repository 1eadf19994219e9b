//! One instance's run of failures: after `consecutive_failures` in a row it
//! asks to be ejected, for `ejection` doubled per ejection since its last
//! success (at most `max_ejection`); a success forgets it all.

use crate::policy::OutlierSettings;
use std::time::Instant;

#[derive(Debug, Default, Clone)]
pub struct Outlier {
    consecutive: u32,
    ejections: u32,
    until: Option<Instant>,
}

impl Outlier {
    /// Counts one outcome; true when the instance should now be ejected.
    pub fn record(&mut self, s: &OutlierSettings, failed: bool) -> bool {
        if !failed {
            *self = Outlier::default();
            return false;
        }
        self.consecutive += 1;
        self.consecutive >= s.consecutive_failures
    }

    /// Ejects it from `now`; returns until when.
    pub fn eject(&mut self, s: &OutlierSettings, now: Instant) -> Instant {
        self.consecutive = 0;
        let doubled = s.ejection.saturating_mul(1u32 << self.ejections.min(20));
        self.ejections += 1;
        let until = now + doubled.min(s.max_ejection);
        self.until = Some(until);
        until
    }

    /// Whether it is out of selection at `now`.
    #[inline]
    pub fn is_out(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }

    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Ejections since its last success.
    pub fn ejections(&self) -> u32 {
        self.ejections
    }

    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive
    }
}
