//! The filesystem service's bad-input path: a service name (any UTF-8 a
//! sender may use, percent-escapes included) and a `Range` header (any
//! bytes). Properties: a name is either refused with 403/404/405 or names
//! segments that cannot leave the directory (no `..`, `.`, empty, hidden,
//! or '/', '\\' or NUL inside); a range is whole, unsatisfiable, or lies
//! inside the file with start <= end.
#![no_main]

use arbitrary::Arbitrary;
use cumulo_core::fuzzing::filesystem::{path, range};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input<'a> {
    name: &'a str,
    range: &'a [u8],
    size: u64,
}

fuzz_target!(|i: Input| {
    match path::parse(i.name, "/s/") {
        Ok(t) => {
            for seg in &t.segments {
                assert!(!seg.is_empty() && seg != "." && seg != "..", "{:?} from {:?}", seg, i.name);
                assert!(!seg.starts_with('.') && !seg.contains(['/', '\\', '\0']), "{:?} from {:?}", seg, i.name);
            }
        }
        Err(refusal) => assert!(matches!(refusal.status(), 403 | 404 | 405)),
    }
    match range::parse(i.range, i.size) {
        range::Ranged::Part { start, end } => assert!(start <= end && end < i.size, "{start}-{end} of {}", i.size),
        range::Ranged::Whole | range::Ranged::Unsatisfiable => {}
    }
});
