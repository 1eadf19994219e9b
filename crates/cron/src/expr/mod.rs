//! Cron expressions in CloudI's syntax (`cloudi_cron`): parsing, and the
//! next civil time that matches. Time zones are `zone.rs`'s concern; here
//! everything is wall-clock time.
//!
//! Fields: `[seconds] minutes hours day-of-month month day-of-week [year]`.
//! Five fields are minutes to day-of-week (seconds 0, any year); six add
//! the year at the end; seven put the seconds first. Day-of-month and
//! day-of-week both restrict (a day must match both), as in CloudI.

mod calendar;
mod field;
mod search;
#[cfg(test)]
mod tests;

use crate::CronError;
pub use calendar::Civil;
use calendar::{days_in_month, nearest_weekday, weekday};
use field::{Item, Kind, Spec};

/// The longest expression accepted, in bytes: bounds the work of parsing.
pub const MAX_EXPRESSION_LEN: usize = 1024;

/// The first and last years an expression can name (CloudI's).
pub const YEAR_MIN: u16 = 1970;
pub const YEAR_MAX: u16 = 9999;
const YEAR_WORDS: usize = (YEAR_MAX - YEAR_MIN) as usize / 64 + 1;

const MONTHS: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const SPECS: [Spec; 7] = [
    Spec { name: "seconds", min: 0, max: 59, names: &[], kind: Kind::Plain },
    Spec { name: "minutes", min: 0, max: 59, names: &[], kind: Kind::Plain },
    Spec { name: "hours", min: 0, max: 23, names: &[], kind: Kind::Plain },
    Spec { name: "day-of-month", min: 1, max: 31, names: &[], kind: Kind::DayOfMonth },
    Spec { name: "month", min: 1, max: 12, names: MONTHS, kind: Kind::Plain },
    // 7 is Sunday too, as 0 (BSD and AT&T cron disagreed).
    Spec { name: "day-of-week", min: 0, max: 7, names: DAYS, kind: Kind::DayOfWeek },
    Spec { name: "year", min: YEAR_MIN as u32, max: YEAR_MAX as u32, names: &[], kind: Kind::Plain },
];

/// The `@` names and the fields they stand for.
const MACROS: &[(&str, &str)] = &[
    ("@yearly", "0 0 0 1 1 * *"),
    ("@annually", "0 0 0 1 1 * *"),
    ("@monthly", "0 0 0 1 * * *"),
    ("@weekly", "0 0 0 * * 0 *"),
    ("@daily", "0 0 0 * * * *"),
    ("@midnight", "0 0 0 * * * *"),
    ("@hourly", "0 0 * * * * *"),
];

/// A parsed expression; random ranges (`~`) were picked when it was parsed.
#[derive(Debug, Clone)]
pub struct Expression {
    /// The seven fields as written (defaults filled in), for display.
    fields: [String; 7],
    seconds: u64,
    minutes: u64,
    hours: u64,
    day_of_month: Option<DaysOfMonth>,
    months: u16,
    day_of_week: Option<DaysOfWeek>,
    /// Bit `y - YEAR_MIN`; `None` for every year.
    years: Option<Box<[u64; YEAR_WORDS]>>,
}

#[derive(Debug, Clone, Default)]
struct DaysOfMonth {
    days: u32,
    last: bool,
    nearest: u32,
    last_nearest: bool,
}

#[derive(Debug, Clone, Default)]
struct DaysOfWeek {
    days: u8,
    last: u8,
    /// `nth[k]`: the days whose k-th of the month matches (k = 1..=5).
    nth: [u8; 6],
}

impl Expression {
    /// Parses `text`, picking random ranges with a fresh generator.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn parse(text: &str) -> Result<Expression, CronError> {
        Expression::parse_with(text, &mut fastrand::Rng::new())
    }

    /// Parses `text`, picking random ranges with `rng`.
    pub fn parse_with(text: &str, rng: &mut fastrand::Rng) -> Result<Expression, CronError> {
        if text.len() > MAX_EXPRESSION_LEN {
            return Err(CronError::new("expression", format!("longer than {MAX_EXPRESSION_LEN} bytes")));
        }
        let words: Vec<&str> = text.split_whitespace().collect();
        let fields: [&str; 7] = match words.as_slice() {
            [m] if m.starts_with('@') => {
                let Some((_, fields)) = MACROS.iter().find(|(name, _)| name.eq_ignore_ascii_case(m)) else {
                    let known: Vec<&str> = MACROS.iter().map(|(n, _)| *n).collect();
                    return Err(CronError::new("expression", format!("unknown '{m}' (known: {})", known.join(", "))));
                };
                let f: Vec<&str> = fields.split(' ').collect();
                [f[0], f[1], f[2], f[3], f[4], f[5], f[6]]
            }
            [mi, h, dom, mo, dow] => ["0", mi, h, dom, mo, dow, "*"],
            [mi, h, dom, mo, dow, y] => ["0", mi, h, dom, mo, dow, y],
            [s, mi, h, dom, mo, dow, y] => [s, mi, h, dom, mo, dow, y],
            _ => {
                return Err(CronError::new(
                    "expression",
                    format!(
                        "has {} fields: give 5 (minutes hours day-of-month month day-of-week), 6 (the 5 and year) \
                         or 7 (seconds, the 5 and year), or an @ name such as @daily",
                        words.len()
                    ),
                ))
            }
        };
        let mut items: [Option<Vec<Item>>; 7] = Default::default();
        for (i, text) in fields.iter().enumerate() {
            items[i] = field::parse(text, &SPECS[i], rng)?;
        }
        let values = |i: usize| -> u64 {
            match &items[i] {
                None => (SPECS[i].min..=SPECS[i].max).fold(0, |m, v| m | 1 << v),
                Some(list) => list.iter().fold(0, |m, it| match it {
                    Item::Value(v) => m | 1 << v,
                    _ => m,
                }),
            }
        };
        let day_of_month = items[3].as_ref().map(|list| {
            list.iter().fold(DaysOfMonth::default(), |mut d, it| {
                match *it {
                    Item::Value(v) => d.days |= 1 << v,
                    Item::Last => d.last = true,
                    Item::Nearest(v) => d.nearest |= 1 << v,
                    Item::LastNearest => d.last_nearest = true,
                    Item::LastOf(_) | Item::Nth(..) => {}
                }
                d
            })
        });
        let day_of_week = items[5].as_ref().map(|list| {
            list.iter().fold(DaysOfWeek::default(), |mut d, it| {
                match *it {
                    Item::Value(v) => d.days |= 1 << (v % 7),
                    Item::LastOf(v) => d.last |= 1 << v,
                    Item::Nth(k, v) => d.nth[k as usize] |= 1 << v,
                    Item::Last | Item::Nearest(_) | Item::LastNearest => {}
                }
                d
            })
        });
        let years = items[6].as_ref().map(|list| {
            let mut set = Box::new([0u64; YEAR_WORDS]);
            for it in list {
                if let Item::Value(y) = *it {
                    let i = (y - u32::from(YEAR_MIN)) as usize;
                    set[i / 64] |= 1 << (i % 64);
                }
            }
            set
        });
        Ok(Expression {
            fields: fields.map(str::to_string),
            seconds: values(0),
            minutes: values(1),
            hours: values(2),
            day_of_month,
            months: values(4) as u16,
            day_of_week,
            years,
        })
    }

    /// The seven fields, space-separated (`0 0 3 * * * *`).
    pub fn fields(&self) -> String {
        self.fields.join(" ")
    }

    fn year_matches(&self, year: u16) -> bool {
        match &self.years {
            None => (YEAR_MIN..=YEAR_MAX).contains(&year),
            Some(set) => {
                let i = usize::from(year.wrapping_sub(YEAR_MIN));
                (YEAR_MIN..=YEAR_MAX).contains(&year) && set[i / 64] & 1 << (i % 64) != 0
            }
        }
    }

    fn month_matches(&self, month: u8) -> bool {
        self.months & 1 << month != 0
    }

    /// Whether the date matches day-of-month and day-of-week (not the
    /// month or the year).
    fn day_matches(&self, year: u16, month: u8, day: u8) -> bool {
        let last = days_in_month(year, month);
        let dom = match &self.day_of_month {
            None => true,
            Some(d) => {
                d.days & 1 << day != 0
                    || (d.last && day == last)
                    || (d.last_nearest && nearest_weekday(year, month, last) == Some(day))
                    || (d.nearest != 0
                        && (1..=last).any(|n| d.nearest & 1 << n != 0 && nearest_weekday(year, month, n) == Some(day)))
            }
        };
        dom && match &self.day_of_week {
            None => true,
            Some(d) => {
                let wd = weekday(year, month, day);
                let bit = 1u8 << wd;
                d.days & bit != 0
                    || (d.last & bit != 0 && day + 7 > last)
                    || d.nth[usize::from((day - 1) / 7 + 1)] & bit != 0
            }
        }
    }
}
