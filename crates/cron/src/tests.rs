//! Golden tables of next events on a fake clock (`next_after` is a pure
//! function of the expression, an instant and a zone), and the settings.

use crate::expr::Expression;
use crate::settings::Settings;
use crate::zone::{next_after, zone_named};
use jiff::Timestamp;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// From `from`, the events of `expr` in `zone` are `want`, in order;
/// `None` at the end: no more.
fn table(rows: &[(&str, &str, &str, &[&str])]) {
    for (expr, zone, from, want) in rows {
        let e = Expression::parse(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let z = zone_named(zone).unwrap();
        let mut t = ts(from);
        for w in want.iter() {
            let got = next_after(&e, t, &z);
            if *w == "None" {
                assert_eq!(got, None, "{expr} in {zone} after {t}");
                break;
            }
            assert_eq!(got, Some(ts(w)), "{expr} in {zone} after {t}");
            t = ts(w);
        }
    }
}

#[test]
fn cloudi_own_cases() {
    table(&[
        (
            "18,38,58 17 * * mon-fri",
            "utc",
            "2019-10-25T17:17:59Z",
            &["2019-10-25T17:18:00Z", "2019-10-25T17:38:00Z", "2019-10-25T17:58:00Z", "2019-10-28T17:18:00Z"],
        ),
        ("18,38,58 17 * * mon-fri", "utc", "2019-11-03T12:30:53Z", &["2019-11-04T17:18:00Z"]),
        ("0 17 LW * *", "utc", "2019-10-30T00:00:00Z", &["2019-10-31T17:00:00Z"]),
        ("0 17 * * 1#3", "utc", "2019-10-01T00:00:00Z", &["2019-10-21T17:00:00Z"]),
        ("0 17 13W * *", "utc", "2019-10-01T00:00:00Z", &["2019-10-14T17:00:00Z"]),
        ("0 17 12W * *", "utc", "2019-10-01T00:00:00Z", &["2019-10-11T17:00:00Z"]),
        ("0 17 * * 1L", "utc", "2019-10-01T00:00:00Z", &["2019-10-28T17:00:00Z"]),
        ("*/1 * * * * 1970", "utc", "2020-08-17T17:00:00Z", &["None"]),
        (
            "18,38,58 17 * * mon-fri 2020",
            "utc",
            "2019-10-25T17:17:59Z",
            &["2020-01-01T17:18:00Z", "2020-01-01T17:38:00Z"],
        ),
    ]);
}

#[test]
fn seconds_minutes_hours_steps_and_ranges() {
    table(&[
        (
            "*/15 * * * * * *",
            "utc",
            "2026-11-28T20:00:07Z",
            &["2026-11-28T20:00:15Z", "2026-11-28T20:00:30Z", "2026-11-28T20:00:45Z", "2026-11-28T20:01:00Z"],
        ),
        // a fraction of a second is after the whole second
        ("* * * * * * *", "utc", "2026-11-28T20:00:07.999Z", &["2026-11-28T20:00:08Z", "2026-11-28T20:00:09Z"]),
        ("30 5 * * * * *", "utc", "2026-11-28T20:05:30Z", &["2026-11-28T21:05:30Z", "2026-11-28T22:05:30Z"]),
        (
            "0 8-18/4 * * *",
            "utc",
            "2026-11-28T00:00:00Z",
            &["2026-11-28T08:00:00Z", "2026-11-28T12:00:00Z", "2026-11-28T16:00:00Z", "2026-11-29T08:00:00Z"],
        ),
        (
            "5/20 * * * *",
            "utc",
            "2026-11-28T20:00:00Z",
            &["2026-11-28T20:05:00Z", "2026-11-28T20:25:00Z", "2026-11-28T20:45:00Z", "2026-11-28T21:05:00Z"],
        ),
        ("59 23 31 12 *", "utc", "2026-11-28T00:00:00Z", &["2026-12-31T23:59:00Z", "2027-12-31T23:59:00Z"]),
        (
            "0,30 0-1 1 * *",
            "utc",
            "2026-11-30T12:00:00Z",
            &[
                "2026-12-01T00:00:00Z",
                "2026-12-01T00:30:00Z",
                "2026-12-01T01:00:00Z",
                "2026-12-01T01:30:00Z",
                "2027-01-01T00:00:00Z",
            ],
        ),
    ]);
}

#[test]
fn months_of_28_to_31_days_and_leap_years() {
    table(&[
        (
            "0 0 31 * *",
            "utc",
            "2026-01-31T00:00:00Z",
            &[
                "2026-03-31T00:00:00Z",
                "2026-05-31T00:00:00Z",
                "2026-07-31T00:00:00Z",
                "2026-08-31T00:00:00Z",
                "2026-10-31T00:00:00Z",
                "2026-12-31T00:00:00Z",
            ],
        ),
        ("0 0 30 * *", "utc", "2026-01-30T00:00:00Z", &["2026-03-30T00:00:00Z"]),
        (
            "0 0 L * *",
            "utc",
            "2026-01-15T00:00:00Z",
            &["2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"],
        ),
        ("0 0 L 2 *", "utc", "2027-03-01T00:00:00Z", &["2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"]),
        ("0 0 29 2 *", "utc", "2026-01-01T00:00:00Z", &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
        // 2100 is not a leap year, 2000 was
        ("0 0 29 2 *", "utc", "2096-03-01T00:00:00Z", &["2104-02-29T00:00:00Z"]),
        ("0 0 29 2 *", "utc", "1999-01-01T00:00:00Z", &["2000-02-29T00:00:00Z"]),
        // a day no month has: never
        ("0 0 30 2 *", "utc", "2026-01-01T00:00:00Z", &["None"]),
        ("0 0 31 4,6,9,11 *", "utc", "2026-01-01T00:00:00Z", &["None"]),
    ]);
}

#[test]
fn last_weekday_nearest_and_nth() {
    table(&[
        // 2026-08-01 is a Saturday: 1W does not go back into July
        ("0 0 1W * *", "utc", "2026-07-31T00:00:00Z", &["2026-08-03T00:00:00Z", "2026-09-01T00:00:00Z"]),
        // 2026-05-31 is a Sunday: the last weekday is Friday the 29th
        ("0 0 LW * *", "utc", "2026-05-01T00:00:00Z", &["2026-05-29T00:00:00Z", "2026-06-30T00:00:00Z"]),
        ("0 0 31W 5 * 2026", "utc", "2026-01-01T00:00:00Z", &["2026-05-29T00:00:00Z", "None"]),
        // no 30th in February: its 30W is skipped
        ("0 0 30W * *", "utc", "2026-02-01T00:00:00Z", &["2026-03-30T00:00:00Z"]),
        (
            "0 0 1W,15W * *",
            "utc",
            "2026-11-01T00:00:00Z",
            &["2026-11-02T00:00:00Z", "2026-11-16T00:00:00Z", "2026-12-01T00:00:00Z", "2026-12-15T00:00:00Z"],
        ),
        ("0 0 * * friL", "utc", "2026-02-01T00:00:00Z", &["2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"]),
        ("0 0 * * 0L", "utc", "2026-11-01T00:00:00Z", &["2026-11-29T00:00:00Z"]),
        // the fifth Friday: only in months that have one
        ("0 0 * * 5#5", "utc", "2026-01-01T00:00:00Z", &["2026-01-30T00:00:00Z", "2026-05-29T00:00:00Z"]),
        (
            "0 0 * * MON#1,fri#2",
            "utc",
            "2026-11-28T00:00:00Z",
            &["2026-12-07T00:00:00Z", "2026-12-11T00:00:00Z", "2027-01-04T00:00:00Z"],
        ),
        // day-of-month and day-of-week both restrict (CloudI's rule)
        (
            "0 0 13 * fri",
            "utc",
            "2026-01-01T00:00:00Z",
            &["2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z", "2026-11-13T00:00:00Z"],
        ),
    ]);
}

#[test]
fn names_and_sunday_as_0_or_7() {
    table(&[
        (
            "0 12 * jan,JUL sun",
            "utc",
            "2026-01-01T00:00:00Z",
            &[
                "2026-01-04T12:00:00Z",
                "2026-01-11T12:00:00Z",
                "2026-01-18T12:00:00Z",
                "2026-01-25T12:00:00Z",
                "2026-07-05T12:00:00Z",
            ],
        ),
        ("0 9 * * 7", "utc", "2026-11-28T00:00:00Z", &["2026-11-29T09:00:00Z", "2026-12-06T09:00:00Z"]),
        (
            "0 9 * * 5-7",
            "utc",
            "2026-11-27T10:00:00Z",
            &["2026-11-28T09:00:00Z", "2026-11-29T09:00:00Z", "2026-12-04T09:00:00Z"],
        ),
        ("0 9 * mar-may/2 *", "utc", "2026-01-01T00:00:00Z", &["2026-03-01T09:00:00Z"]),
    ]);
}

#[test]
fn years_in_the_six_and_seven_field_forms() {
    table(&[
        (
            "0 0 1 1 * 2030,2032",
            "utc",
            "2026-11-28T00:00:00Z",
            &["2030-01-01T00:00:00Z", "2032-01-01T00:00:00Z", "None"],
        ),
        (
            "0 0 0 1 1 * 2030-2040/5",
            "utc",
            "2026-11-28T00:00:00Z",
            &["2030-01-01T00:00:00Z", "2035-01-01T00:00:00Z", "2040-01-01T00:00:00Z", "None"],
        ),
        ("0 0 0 29 2 * 2027-2031", "utc", "2026-11-28T00:00:00Z", &["2028-02-29T00:00:00Z", "None"]),
        // the last instant there is (jiff's range ends on 9999-12-30 at 22:00 UTC)
        ("59 59 21 30 12 * 9999", "utc", "2026-11-28T00:00:00Z", &["9999-12-30T21:59:59Z", "None"]),
        ("0 0 0 31 12 * 9999", "utc", "2026-11-28T00:00:00Z", &["None"]),
    ]);
}

#[test]
fn at_names() {
    let from = "2026-11-28T20:30:00Z";
    table(&[
        ("@yearly", "utc", from, &["2027-01-01T00:00:00Z"]),
        ("@annually", "utc", from, &["2027-01-01T00:00:00Z"]),
        ("@monthly", "utc", from, &["2026-12-01T00:00:00Z"]),
        ("@weekly", "utc", from, &["2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z"]),
        ("@daily", "utc", from, &["2026-11-29T00:00:00Z"]),
        ("@midnight", "utc", from, &["2026-11-29T00:00:00Z"]),
        ("@hourly", "utc", from, &["2026-11-28T21:00:00Z", "2026-11-28T22:00:00Z"]),
    ]);
}

#[test]
fn dst_new_york_spring_forward_fires_skipped_times_once_at_the_jump() {
    // 2026-03-08 02:00 EST (07:00Z) becomes 03:00 EDT.
    table(&[
        (
            "30 2 * * *",
            "America/New_York",
            "2026-03-06T12:00:00Z",
            &["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
        ),
        // 02:00, 02:15, 02:30, 02:45 and 03:00 are one event, at the jump
        ("*/15 * * * *", "America/New_York", "2026-03-08T06:50:00Z", &["2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z"]),
        ("0 3 * * *", "America/New_York", "2026-03-07T12:00:00Z", &["2026-03-08T07:00:00Z", "2026-03-09T07:00:00Z"]),
    ]);
}

#[test]
fn dst_new_york_fall_back_fires_repeated_times_once() {
    // 2026-11-01 02:00 EDT (06:00Z) becomes 01:00 EST: 01:00-02:00 twice.
    table(&[
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", &["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]),
        (
            "*/30 * * * *",
            "America/New_York",
            "2026-11-01T04:50:00Z",
            &["2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"],
        ),
        // started during the second pass: its times already fired
        ("*/30 * * * *", "America/New_York", "2026-11-01T06:10:00Z", &["2026-11-01T07:00:00Z"]),
        ("0 2 * * *", "America/New_York", "2026-10-31T12:00:00Z", &["2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"]),
    ]);
}

#[test]
fn dst_london_both_ways() {
    // 2026-03-29 01:00 GMT becomes 02:00 BST; 2026-10-25 02:00 BST becomes 01:00 GMT.
    table(&[
        ("15 1 * * *", "Europe/London", "2026-03-28T12:00:00Z", &["2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z"]),
        ("15 1 * * *", "Europe/London", "2026-10-24T12:00:00Z", &["2026-10-25T00:15:00Z", "2026-10-26T01:15:00Z"]),
        (
            "0 * * * *",
            "Europe/London",
            "2026-10-24T23:30:00Z",
            &["2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"],
        ),
    ]);
}

#[test]
fn events_in_a_zone_without_dst_are_its_civil_times() {
    table(&[("0 9 * * *", "Asia/Tokyo", "2026-11-28T00:00:00Z", &["2026-11-29T00:00:00Z"])]);
}

/// Parses `settings = { ... }` as a config file would hand it over.
fn settings(text: &str) -> Result<Settings, String> {
    let t: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    Settings::from_settings(&t).map_err(|e| format!("cron: {e}"))
}

#[test]
fn settings_are_read_whole() {
    let s = settings(
        r#"
        timezone = "Europe/London"
        via = "/queue/"
        [[job]]
        name = "nightly"
        schedule = "0 3 * * *"
        dest = "/reports/build/post"
        request_info = { kind = "full" }
        request = "go"
        timeout_ms = 5000
        priority = -3
        [[job]]
        name = "tick"
        schedule = "* * * * * * *"
        dest = "/ticks/post"
        "#,
    )
    .unwrap();
    assert_eq!(s.timezone_name, "Europe/London");
    assert_eq!(s.via.as_deref(), Some("/queue/"));
    assert_eq!(s.jobs.len(), 2);
    let j = &s.jobs[0];
    assert_eq!(
        (j.name.as_str(), j.dest.as_str(), j.mcast, j.timeout_ms, j.priority),
        ("nightly", "/reports/build/post", false, 5000, -3)
    );
    assert_eq!(j.request_info, b"kind\0full\0");
    assert_eq!(j.request, b"go");
    assert_eq!(s.jobs[1].timeout_ms, 0);
}

#[test]
fn through_a_queue_random_values_are_the_same_on_every_node() {
    let text = |via: &str| format!("{via}\n[[job]]\nname = \"spread\"\nschedule = \"~ ~ * * *\"\ndest = \"/r\"");
    let fields = |via: &str| {
        let s = settings(&text(via)).unwrap();
        let e = &s.jobs[0].schedule;
        (0..4)
            .map(|k| next_after(e, ts("2026-11-28T20:00:00Z") + jiff::SignedDuration::from_hours(24 * k), &s.timezone))
            .collect::<Vec<_>>()
    };
    let via = "via = \"/q/\"";
    assert_eq!(fields(via), fields(via), "two nodes, one job: the same times");
    // without a queue each node picks its own (almost surely different in 20 tries)
    let first = fields("");
    assert!((0..20).any(|_| fields("") != first));
}

#[test]
fn settings_errors_name_the_field_and_the_reason() {
    let job =
        |extra: &str| format!("[[job]]\nname = \"nightly\"\nschedule = \"0 3 * * *\"\ndest = \"/r/post\"\n{extra}");
    let cases = [
        ("colour = 1".to_string(), "cron: colour: unknown setting (known: timezone, via, job)"),
        ("".to_string(), "cron: job: at least one job is required"),
        (format!("timezone = \"Mars/Olympus\"\n{}", job("")), "cron: timezone: 'Mars/Olympus'"),
        (format!("via = \"queue\"\n{}", job("")), "cron: via: must be a queue service's prefix"),
        (format!("via = \"/q/\"\n{}", job("mcast = true")), "cron: job[0] (nightly).mcast: cannot be true with `via`"),
        (
            "[[job]]\nname = \"nightly\"\nschedule = \"0 3 32 * *\"\ndest = \"/r/post\"".to_string(),
            "cron: job[0] (nightly).schedule: day-of-month: 32 is out of range 1-31",
        ),
        (
            "[[job]]\nname = \"feb30\"\nschedule = \"0 0 30 2 *\"\ndest = \"/r/post\"".to_string(),
            "cron: job[0] (feb30).schedule: '0 0 30 2 *' matches no date (such as February 30): it would never fire",
        ),
        ("[[job]]\nschedule = \"* * * * *\"\ndest = \"/r/post\"".to_string(), "cron: job[0].name: is required"),
        (
            "[[job]]\nname = \"a b\"\nschedule = \"* * * * *\"\ndest = \"/r/post\"".to_string(),
            "cron: job[0] (a b).name: must be 1 to 64",
        ),
        ("[[job]]\nname = \"x\"\ndest = \"/r/post\"".to_string(), "cron: job[0] (x).schedule: is required"),
        (
            "[[job]]\nname = \"x\"\nschedule = \"* * * * *\"\ndest = \"r/*\"".to_string(),
            "cron: job[0] (x).dest: must be a service name",
        ),
        (job("colour = 1"), "cron: job[0] (nightly).colour: unknown setting"),
        (job("priority = 200"), "cron: job[0] (nightly).priority: must be an integer in -128 ..= 127"),
        (job("timeout_ms = -1"), "cron: job[0] (nightly).timeout_ms: must be an integer"),
        (job("request_info = { a = 1 }"), "cron: job[0] (nightly).request_info: 'a' must be a string"),
        (job("mcast = \"yes\""), "cron: job[0] (nightly).mcast: must be true or false"),
        (format!("{}\n{}", job(""), job("")), "cron: job[1].name: 'nightly' is used twice"),
        (
            job(&format!("request = \"{}\"", "x".repeat(65 * 1024))),
            "cron: job[0] (nightly).request: request and request_info are over 65536 bytes",
        ),
    ];
    for (text, want) in cases {
        let e = settings(&text).err().unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(e.starts_with(want), "{text}\n got: {e}\nwant: {want}");
    }
    let many: String =
        (0..1001).map(|i| format!("[[job]]\nname = \"j{i}\"\nschedule = \"@daily\"\ndest = \"/r\"\n")).collect();
    assert_eq!(settings(&many).err().unwrap(), "cron: job: 1001 jobs: at most 1000");
}

#[test]
fn a_schedule_whose_times_are_past_loads_idle() {
    let s = settings("[[job]]\nname = \"n\"\nschedule = \"0 0 1 1 * 2020\"\ndest = \"/r\"").unwrap();
    assert_eq!(next_after(&s.jobs[0].schedule, Timestamp::now(), &s.timezone), None);
}

#[test]
fn local_is_the_systems_zone_and_says_which() {
    let s = settings("timezone = \"local\"\n[[job]]\nname = \"n\"\nschedule = \"@daily\"\ndest = \"/r\"").unwrap();
    assert!(s.timezone_name.starts_with("local"), "{}", s.timezone_name);
    let utc = settings("[[job]]\nname = \"n\"\nschedule = \"@daily\"\ndest = \"/r\"").unwrap();
    assert_eq!(utc.timezone_name, "utc");
}

/// The fuzz target's properties (fuzz/src/bin/cron_expression.rs) on
/// expressions drawn at random from the characters they are made of: an
/// error names a field; the next event is after the instant, a whole
/// second, found again from the second before it, and followed by a later one.
#[test]
fn random_expressions_keep_the_fuzz_targets_properties() {
    const FIELDS: &[&str] =
        &["expression", "seconds", "minutes", "hours", "day-of-month", "month", "day-of-week", "year"];
    // Items every field takes, then each field's own (and a few mistakes).
    let common = ["*", "*/5", "*/1", "1", "5", "7", "1-5", "2-4/2", "5/7", "~", "~/7", "3~9", "3~9/2", "x", "*,"];
    let own: [&[&str]; 7] = [
        &["0", "59", "30-40"],
        &["0", "59", "0-30/15"],
        &["0", "23", "12-14"],
        &["15", "29", "30", "31", "L", "LW", "15W", "30W", "1W"],
        &["2", "12", "jan", "feb", "mar-may"],
        &["0", "6", "5L", "fri#2", "1#5", "mon-fri", "sun", "SATL"],
        &["2030", "2027-2031/2", "1970", "9999", "2026"],
    ];
    let zones: Vec<_> = ["utc", "America/New_York", "Europe/London", "Australia/Lord_Howe"]
        .iter()
        .map(|z| zone_named(z).unwrap())
        .collect();
    let mut rng = fastrand::Rng::with_seed(7);
    let (mut parsed, mut fired) = (0, 0);
    for _ in 0..20_000 {
        let n = rng.usize(5..=7);
        // Which of the seven fields each written one is.
        let kinds: &[usize] = match n {
            5 => &[1, 2, 3, 4, 5],
            6 => &[1, 2, 3, 4, 5, 6],
            _ => &[0, 1, 2, 3, 4, 5, 6],
        };
        let fields: Vec<String> = kinds
            .iter()
            .map(|&k| {
                let list: Vec<&str> =
                    (0..rng.usize(1..=2))
                        .map(|_| {
                            if rng.bool() {
                                common[rng.usize(..common.len())]
                            } else {
                                own[k][rng.usize(..own[k].len())]
                            }
                        })
                        .collect();
                list.join(",")
            })
            .collect();
        let text = fields.join(" ");
        let e = match Expression::parse_with(&text, &mut rng) {
            Err(e) => {
                assert!(FIELDS.contains(&e.field()) && !e.reason().is_empty(), "{text:?}: {e}");
                continue;
            }
            Ok(e) => e,
        };
        parsed += 1;
        let zone = &zones[rng.usize(..zones.len())];
        let t = Timestamp::from_second(rng.i64(0..4_000_000_000)).unwrap();
        let Some(next) = next_after(&e, t, zone) else { continue };
        fired += 1;
        assert!(next > t && next.subsec_nanosecond() == 0, "{text:?} after {t}: {next}");
        let before = Timestamp::from_second(next.as_second() - 1).unwrap().max(t);
        assert_eq!(next_after(&e, before, zone), Some(next), "{text:?} after {before}");
        if let Some(after) = next_after(&e, next, zone) {
            assert!(after > next, "{text:?}: {after} after {next}");
        }
    }
    eprintln!("{parsed} parsed, {fired} fired");
    assert!(parsed > 1000 && fired > 500, "{parsed} parsed, {fired} fired");
}
