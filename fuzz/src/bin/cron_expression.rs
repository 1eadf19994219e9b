//! Cron expressions (docs/CRON.md): the parser refuses with a field and a
//! reason or accepts, never panics; for an accepted expression the next
//! event after an instant, in UTC and in a zone with DST, is later than it,
//! and the first event after any instant between the two is that same
//! event (no event skipped, none found twice). Bytes are mapped onto the
//! characters an expression is made of, half the time, so that near misses
//! are frequent.
#![no_main]

use cumulo_cron::expr::Expression;
use cumulo_cron::jiff::Timestamp;
use cumulo_cron::zone::{next_after, zone_named};
use libfuzzer_sys::fuzz_target;

const FIELDS: &[&str] =
    &["expression", "seconds", "minutes", "hours", "day-of-month", "month", "day-of-week", "year"];
const ALPHABET: &[u8] = b"0123456789 0123456789 ****////,,,---~~LW#@?JANFEBMARSUNMONFRIyearlyhourly7";

fuzz_target!(|input: (bool, u8, u32, Vec<u8>)| {
    let (mapped, zone, start, bytes) = input;
    let text: String = if mapped {
        bytes.iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect()
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let mut rng = cumulo_cron::fastrand::Rng::with_seed(u64::from(start));
    let expr = match Expression::parse_with(&text, &mut rng) {
        Err(e) => {
            assert!(FIELDS.contains(&e.field()), "{text:?}: field {:?}", e.field());
            assert!(!e.reason().is_empty(), "{text:?}");
            return;
        }
        Ok(expr) => expr,
    };
    let zone = zone_named(["utc", "America/New_York", "Europe/London", "Australia/Lord_Howe"][zone as usize % 4])
        .expect("a zone of the tz database");
    // From 1970 to about 2106.
    let t = Timestamp::from_second(i64::from(start)).unwrap();
    let Some(next) = next_after(&expr, t, &zone) else { return };
    assert!(next > t, "{text:?}: {next} is not after {t}");
    assert_eq!(next.subsec_nanosecond(), 0, "{text:?}: {next}");
    let just_before = Timestamp::from_second(next.as_second() - 1).unwrap().max(t);
    assert_eq!(next_after(&expr, just_before, &zone), Some(next), "{text:?} after {just_before}");
    if let Some(after) = next_after(&expr, next, &zone) {
        assert!(after > next, "{text:?}: {after} is not after {next}");
    }
});
