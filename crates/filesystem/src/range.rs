//! The `Range` request header (RFC 9110 section 14.2), the single-range
//! form: `bytes=a-b`, `bytes=a-`, `bytes=-n`. Several ranges, another
//! unit or a malformed value are ignored (the whole file is served, as
//! the RFC allows); a range that starts past the end is unsatisfiable (416).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ranged {
    /// Serve the whole file (no usable range).
    Whole,
    /// Serve bytes `start ..= end` (206).
    Part { start: u64, end: u64 },
    /// 416, with `Content-Range: bytes */size`.
    Unsatisfiable,
}

pub fn parse(header: &[u8], size: u64) -> Ranged {
    let Ok(text) = std::str::from_utf8(header) else { return Ranged::Whole };
    let text = text.trim();
    let Some((unit, spec)) = text.split_once('=') else { return Ranged::Whole };
    if !unit.trim().eq_ignore_ascii_case("bytes") || spec.contains(',') {
        return Ranged::Whole;
    }
    let Some((first, last)) = spec.trim().split_once('-') else { return Ranged::Whole };
    let (first, last) = (first.trim(), last.trim());
    let number = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    match (first.is_empty(), last.is_empty()) {
        (true, true) => Ranged::Whole,
        // `-n`: the last n bytes
        (true, false) => match number(last) {
            None => Ranged::Whole,
            Some(0) => Ranged::Unsatisfiable,
            Some(_) if size == 0 => Ranged::Unsatisfiable,
            Some(n) => Ranged::Part { start: size.saturating_sub(n), end: size - 1 },
        },
        (false, _) => {
            let Some(start) = number(first) else { return Ranged::Whole };
            let end = if last.is_empty() {
                u64::MAX
            } else {
                match number(last) {
                    Some(e) if e >= start => e,
                    _ => return Ranged::Whole,
                }
            };
            if start >= size {
                Ranged::Unsatisfiable
            } else {
                Ranged::Part { start, end: end.min(size - 1) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ranged::*;

    #[test]
    fn ranges_of_a_100_byte_file() {
        let table: &[(&str, Ranged)] = &[
            ("bytes=0-9", Part { start: 0, end: 9 }),
            ("bytes=90-", Part { start: 90, end: 99 }),
            ("bytes=90-1000", Part { start: 90, end: 99 }),
            ("bytes=-10", Part { start: 90, end: 99 }),
            ("bytes=-1000", Part { start: 0, end: 99 }),
            ("Bytes = 5 - 5 ", Part { start: 5, end: 5 }),
            ("bytes=100-", Unsatisfiable),
            ("bytes=-0", Unsatisfiable),
            ("bytes=9-0", Whole),
            ("bytes=0-1,5-6", Whole),
            ("items=0-1", Whole),
            ("bytes=-", Whole),
            ("bytes=a-b", Whole),
            ("bytes=+1-2", Whole),
            ("bytes=99999999999999999999999-", Whole),
            ("bytes", Whole),
            ("", Whole),
        ];
        for (header, want) in table {
            assert_eq!(parse(header.as_bytes(), 100), *want, "{header}");
        }
        assert_eq!(parse(b"bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse(b"bytes=-5", 0), Unsatisfiable);
        assert_eq!(parse(b"\xff", 10), Whole);
    }
}
