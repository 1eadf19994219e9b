//! One field of an expression: a list of items (`,`), each a value or
//! name, a range (`-`), a random value (`~`), a step (`/`), or one of the
//! day fields' specials (`L`, `W`, `LW`, `#`).

use crate::CronError;

/// What a field allows.
pub struct Spec {
    pub name: &'static str,
    pub min: u32,
    pub max: u32,
    /// Names for min, min + 1, ... (lower case; matched in any case).
    pub names: &'static [&'static str],
    pub kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    DayOfMonth,
    DayOfWeek,
}

/// One item of a field, once parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    Value(u32),
    /// `L` in day-of-month: the month's last day.
    Last,
    /// `15W`: the weekday nearest the 15th, within the month.
    Nearest(u32),
    /// `LW`: the last weekday of the month.
    LastNearest,
    /// `5L` in day-of-week: the month's last Friday.
    LastOf(u32),
    /// `5#3` in day-of-week: the month's third Friday.
    Nth(u32, u32),
}

/// The items of `text`, or `None` for `*` (every value).
pub fn parse(text: &str, spec: &Spec, rng: &mut fastrand::Rng) -> Result<Option<Vec<Item>>, CronError> {
    let err = |reason: String| CronError::new(spec.name, reason);
    if text == "*" {
        return Ok(None);
    }
    let mut items = Vec::new();
    for segment in text.split(',') {
        segment_items(segment, spec, rng, &mut items).map_err(err)?;
    }
    Ok(Some(items))
}

fn segment_items(s: &str, spec: &Spec, rng: &mut fastrand::Rng, out: &mut Vec<Item>) -> Result<(), String> {
    if s.is_empty() {
        return Err("an empty item in its list (two commas, or one at an end)".into());
    }
    if s == "?" {
        return Err("'?' is not supported: use '*'".into());
    }
    if let Some((base, step)) = s.split_once('/') {
        let step = number(step)
            .filter(|n| (1..=spec.max - spec.min).contains(n))
            .ok_or_else(|| format!("step '{step}' in '{s}' must be a number from 1 to {}", spec.max - spec.min))?;
        let (first, last) = match base {
            "*" => (spec.min, spec.max),
            "~" => (random(rng, spec.min, (spec.min + step - 1).min(spec.max)), spec.max),
            _ => {
                if let Some((a, b)) = base.split_once('~') {
                    let (a, b) = bounds(a, b, '~', spec)?;
                    (random(rng, a, (a + step - 1).min(b)), b)
                } else if let Some((a, b)) = base.split_once('-') {
                    bounds(a, b, '-', spec)?
                } else {
                    (value(base, spec)?, spec.max)
                }
            }
        };
        out.extend((first..=last).step_by(step as usize).map(Item::Value));
        return Ok(());
    }
    if s == "*" {
        return Err("'*' stands alone or with a step ('*/5'), not in a list".into());
    }
    if s == "~" {
        out.push(Item::Value(random(rng, spec.min, spec.max)));
        return Ok(());
    }
    if let Some((a, b)) = s.split_once('~') {
        let (a, b) = bounds(a, b, '~', spec)?;
        out.push(Item::Value(random(rng, a, b)));
        return Ok(());
    }
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = bounds(a, b, '-', spec)?;
        out.extend((a..=b).map(Item::Value));
        return Ok(());
    }
    out.push(special(s, spec)?.map_or_else(|| value(s, spec).map(Item::Value), Ok)?);
    Ok(())
}

/// The day fields' specials, or `None` when `s` is none of them.
fn special(s: &str, spec: &Spec) -> Result<Option<Item>, String> {
    let upper = s.to_ascii_uppercase();
    match spec.kind {
        Kind::Plain => Ok(None),
        Kind::DayOfMonth => Ok(match upper.as_str() {
            "L" => Some(Item::Last),
            "LW" | "WL" => Some(Item::LastNearest),
            _ => match upper.strip_suffix('W') {
                Some(day) => Some(Item::Nearest(value(day, spec).map_err(|e| format!("in '{s}': {e}"))?)),
                None if upper.contains('L') || upper.contains('W') => {
                    return Err(format!("'{s}': L and W are 'L', 'LW' or '<day>W' (e.g. 15W)"))
                }
                None => None,
            },
        }),
        Kind::DayOfWeek => {
            if upper == "L" {
                return Err("'L' in day-of-week follows a day: '5L' or 'FRIL' is the month's last Friday".into());
            }
            if let Some(day) = upper.strip_suffix('L') {
                let day = value(day, spec).map_err(|e| format!("in '{s}': {e}"))?;
                return Ok(Some(Item::LastOf(day % 7)));
            }
            if let Some((day, nth)) = s.split_once('#') {
                let day = value(day, spec).map_err(|e| format!("in '{s}': {e}"))?;
                let nth = number(nth)
                    .filter(|n| (1..=5).contains(n))
                    .ok_or_else(|| format!("in '{s}': the number after '#' must be 1 to 5"))?;
                return Ok(Some(Item::Nth(nth, day % 7)));
            }
            Ok(None)
        }
    }
}

/// The ends of a range (`a-b`) or random range (`a~b`), in order.
fn bounds(a: &str, b: &str, sep: char, spec: &Spec) -> Result<(u32, u32), String> {
    let (lo, hi) = (value(a, spec)?, value(b, spec)?);
    if lo > hi {
        return Err(format!("the range '{a}{sep}{b}' runs backwards (ranges do not wrap around)"));
    }
    Ok((lo, hi))
}

/// A number or a name within the field's limits.
fn value(s: &str, spec: &Spec) -> Result<u32, String> {
    if let Some(i) = spec.names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
        return Ok(spec.min + i as u32);
    }
    let n = number(s).ok_or_else(|| {
        if spec.names.is_empty() {
            format!("'{s}' is not a number")
        } else {
            format!("'{s}' is not a number or a name ({})", spec.names.join(", "))
        }
    })?;
    if !(spec.min..=spec.max).contains(&n) {
        return Err(format!("{n} is out of range {}-{}", spec.min, spec.max));
    }
    Ok(n)
}

/// Decimal digits only (no sign, no spaces), at most 4 of them.
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 4 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn random(rng: &mut fastrand::Rng, lo: u32, hi: u32) -> u32 {
    rng.u32(lo..=hi)
}
