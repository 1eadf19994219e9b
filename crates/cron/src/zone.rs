//! From civil time to instants: UTC, the system's zone or a named IANA
//! zone, and what happens to events when the zone's offset changes (DST).
//!
//! Every matching civil time fires once, at the first instant the wall
//! clock shows it:
//! - clocks go back (a fold): a time in the repeated hour fires in its
//!   first pass only; during the second pass nothing fires that already did.
//! - clocks jump forward (a gap): the times skipped over fire once, together,
//!   at the jump.

use crate::expr::{Civil, Expression, YEAR_MIN};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{civil::DateTime, SignedDuration, Timestamp};

/// The first instant after `after` at which `expr` fires in `zone`, or
/// `None` when it never fires again.
pub fn next_after(expr: &Expression, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
    let now = zone.to_datetime(after);
    // The first whole second after `after`, in civil time.
    let mut start = civil(now.checked_add(SignedDuration::from_secs(1)).ok()?);
    // In the second pass of a repeated hour, its civil times already fired:
    // start at the end of the fold.
    if let AmbiguousOffset::Fold { before, after: later } = zone.to_ambiguous_timestamp(now).offset() {
        if zone.to_offset(after) == later && before != later {
            let jump = zone.preceding(after.checked_add(SignedDuration::from_nanos(1)).ok()?).next()?.timestamp();
            start = start.max(civil(before.to_datetime(jump)));
        }
    }
    if start.year < YEAR_MIN {
        start = Civil { year: YEAR_MIN, month: 1, day: 1, hour: 0, minute: 0, second: 0 };
    }
    let mut from = start;
    loop {
        let x = expr.first_at_or_after(from)?;
        // Out of range (past 9999-12-30 in UTC): never.
        let at = resolve(x, zone)?;
        if at > after {
            return Some(at);
        }
        // Not after `after`: look further.
        from = civil(datetime(x)?.checked_add(SignedDuration::from_secs(1)).ok()?);
    }
}

/// The instant a civil time fires at: its first occurrence in a fold, the
/// jump in a gap.
fn resolve(x: Civil, zone: &TimeZone) -> Option<Timestamp> {
    let dt = datetime(x)?;
    match zone.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(dt).ok(),
        AmbiguousOffset::Fold { before, .. } => before.to_timestamp(dt).ok(),
        AmbiguousOffset::Gap { before, .. } => {
            // Read with the offset before the gap, the time is already past
            // the jump: the jump is the last transition before it.
            let past = before.to_timestamp(dt).ok()?;
            Some(zone.preceding(past.checked_add(SignedDuration::from_nanos(1)).ok()?).next()?.timestamp())
        }
    }
}

fn civil(dt: DateTime) -> Civil {
    Civil {
        year: u16::try_from(dt.year()).unwrap_or(0),
        month: dt.month() as u8,
        day: dt.day() as u8,
        hour: dt.hour() as u8,
        minute: dt.minute() as u8,
        second: dt.second() as u8,
    }
}

fn datetime(x: Civil) -> Option<DateTime> {
    DateTime::new(x.year as i16, x.month as i8, x.day as i8, x.hour as i8, x.minute as i8, x.second as i8, 0).ok()
}

/// The zone a setting names: `utc`, `local` (the system's), or an IANA name.
pub fn zone_named(name: &str) -> Result<TimeZone, String> {
    match name {
        "utc" | "UTC" => Ok(TimeZone::UTC),
        "local" => TimeZone::try_system().map_err(|e| format!("the system's time zone: {e}")),
        _ => TimeZone::get(name).map_err(|e| format!("'{name}': {e}")),
    }
}
