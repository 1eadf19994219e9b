//! Proleptic Gregorian dates, as plain numbers: the search of the next
//! event walks days and months without building a date type for each.

/// A civil (wall clock) date and time, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Civil {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

pub fn is_leap(year: u16) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

pub fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: u16, month: u8, day: u8) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// 0 = Sunday .. 6 = Saturday (1970-01-01 was a Thursday).
pub fn weekday(year: u16, month: u8, day: u8) -> u8 {
    (days_from_civil(year, month, day) + 4).rem_euclid(7) as u8
}

/// The weekday (Monday to Friday) nearest to `day` within its month: a
/// Saturday moves back to Friday and a Sunday on to Monday, unless that
/// leaves the month (the 1st on a Saturday gives Monday the 3rd; the last
/// day on a Sunday gives Friday). `None` when the month has no such day.
pub fn nearest_weekday(year: u16, month: u8, day: u8) -> Option<u8> {
    let last = days_in_month(year, month);
    if day == 0 || day > last {
        return None;
    }
    Some(match weekday(year, month, day) {
        6 if day > 1 => day - 1,
        6 => day + 2,
        0 if day < last => day + 1,
        0 => day - 2,
        _ => day,
    })
}
