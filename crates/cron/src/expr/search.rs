//! The first civil time at or after a given one that an expression
//! matches: a walk over years, months and days that match, then the first
//! time of day. Bounded: a year's matching days depend only on its place in
//! the 400-year Gregorian cycle (which is a whole number of weeks), so once
//! every place was searched whole in vain, nothing will match.

use super::calendar::{days_in_month, Civil};
use super::{Expression, YEAR_MAX};

/// The lowest set bit of `mask` at or above `from`.
fn next_bit(mask: u64, from: u8) -> Option<u8> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros() as u8)
}

impl Expression {
    /// The first civil time `>= start` that matches, or `None` when there
    /// is none up to the end of [`YEAR_MAX`].
    pub fn first_at_or_after(&self, start: Civil) -> Option<Civil> {
        let mut empty_cycle_years = [false; 400];
        let mut empty_count = 0;
        for year in start.year..=YEAR_MAX {
            if !self.year_matches(year) {
                continue;
            }
            let whole_year = year != start.year;
            if whole_year && empty_cycle_years[usize::from(year % 400)] {
                continue;
            }
            for month in 1..=12u8 {
                let start_month = !whole_year && month == start.month;
                if (!whole_year && month < start.month) || !self.month_matches(month) {
                    continue;
                }
                let first_day = if start_month { start.day } else { 1 };
                for day in first_day..=days_in_month(year, month) {
                    if !self.day_matches(year, month, day) {
                        continue;
                    }
                    let from = if start_month && day == start.day {
                        (start.hour, start.minute, start.second)
                    } else {
                        (0, 0, 0)
                    };
                    if let Some((hour, minute, second)) = self.first_time(from) {
                        return Some(Civil { year, month, day, hour, minute, second });
                    }
                }
            }
            if whole_year {
                empty_cycle_years[usize::from(year % 400)] = true;
                empty_count += 1;
                if empty_count == 400 {
                    return None;
                }
            }
        }
        None
    }

    /// The first time of day at or after `(hour, minute, second)`.
    fn first_time(&self, (h0, m0, s0): (u8, u8, u8)) -> Option<(u8, u8, u8)> {
        let mut hour = next_bit(self.hours, h0)?;
        loop {
            let m_from = if hour == h0 { m0 } else { 0 };
            let mut minute = next_bit(self.minutes, m_from);
            while let Some(m) = minute {
                let s_from = if hour == h0 && m == m0 { s0 } else { 0 };
                if let Some(s) = next_bit(self.seconds, s_from) {
                    return Some((hour, m, s));
                }
                minute = next_bit(self.minutes, m + 1);
            }
            hour = next_bit(self.hours, hour + 1)?;
        }
    }
}
