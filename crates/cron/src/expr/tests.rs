//! The parser: what each field accepts, and errors that name the field.

use super::Expression;

fn fields(text: &str) -> String {
    Expression::parse(text).unwrap_or_else(|e| panic!("{text}: {e}")).fields()
}

#[test]
fn five_six_and_seven_fields_are_placed_as_cloudi_places_them() {
    // 5: seconds 0 first, any year last; 6: the year is the last field;
    // 7: seconds first.
    assert_eq!(fields("  40 16   *   * mon-fri  "), "0 40 16 * * mon-fri *");
    assert_eq!(fields("0 3 * * * 2030"), "0 0 3 * * * 2030");
    assert_eq!(fields("*/5 0 3 * * * *"), "*/5 0 3 * * * *");
    assert_eq!(fields("@midnight"), "0 0 0 * * * *");
    assert_eq!(fields("@Weekly"), "0 0 0 * * 0 *");
}

#[test]
fn random_ranges_are_picked_once_within_their_bounds() {
    for seed in 0..200 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let e = Expression::parse_with("0~59/10 ~ 3~5 * * *", &mut rng).unwrap();
        let minutes: Vec<u32> = (0..60).filter(|m| e.minutes & 1 << m != 0).collect();
        assert_eq!(minutes.len(), 6, "{minutes:?}");
        assert!(minutes[0] <= 9 && minutes.windows(2).all(|w| w[1] - w[0] == 10), "{minutes:?}");
        assert_eq!(e.hours.count_ones(), 1);
        let dom = e.day_of_month.as_ref().unwrap();
        assert_eq!(dom.days.count_ones(), 1);
        assert!((3..=5).contains(&dom.days.trailing_zeros()));
        let e = Expression::parse_with("~/20 * * * *", &mut rng).unwrap();
        assert_eq!(e.minutes.count_ones(), 3);
        assert!(e.minutes.trailing_zeros() < 20);
    }
    let e = Expression::parse("5~5 * * * *").unwrap();
    assert_eq!(e.minutes, 1 << 5);
}

#[test]
fn errors_name_the_field_and_the_reason() {
    let long = "1,".repeat(600) + "1 * * * *";
    let cases: &[(&str, &str, &str)] = &[
        ("", "expression", "has 0 fields"),
        ("* * * *", "expression", "has 4 fields"),
        ("* * * * * * * *", "expression", "has 8 fields"),
        ("@reboot", "expression", "unknown '@reboot'"),
        (&long, "expression", "longer than 1024 bytes"),
        ("60 * * * *", "minutes", "60 is out of range 0-59"),
        ("* 24 * * *", "hours", "24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month", "0 is out of range 1-31"),
        ("* * 32 * *", "day-of-month", "32 is out of range 1-31"),
        ("* * 15X * *", "day-of-month", "'15X' is not a number"),
        ("* * 40W * *", "day-of-month", "in '40W': 40 is out of range"),
        ("* * L2 * *", "day-of-month", "L and W are"),
        ("* * * 13 *", "month", "13 is out of range 1-12"),
        ("* * * foo *", "month", "'foo' is not a number or a name (jan, feb"),
        ("* * * * 8", "day-of-week", "8 is out of range 0-7"),
        ("* * * * 5#6", "day-of-week", "after '#' must be 1 to 5"),
        ("* * * * L", "day-of-week", "'L' in day-of-week follows a day"),
        ("* * * * 1W", "day-of-week", "'1W' is not a number or a name"),
        ("* * * * sat-sun", "day-of-week", "runs backwards"),
        ("0 0 1 1 * 1969", "year", "1969 is out of range 1970-9999"),
        ("0 0 0 1 1 * 10000", "year", "'10000' is not a number"),
        ("5-3 * * * *", "minutes", "the range '5-3' runs backwards"),
        ("9~2 * * * *", "minutes", "the range '9~2' runs backwards"),
        ("*/0 * * * *", "minutes", "step '0' in '*/0' must be a number from 1 to 59"),
        ("*/60 * * * *", "minutes", "must be a number from 1 to 59"),
        ("1-5/x * * * *", "minutes", "step 'x'"),
        ("? * * * *", "minutes", "'?' is not supported"),
        ("1,,2 * * * *", "minutes", "an empty item"),
        ("*,5 * * * *", "minutes", "'*' stands alone"),
        ("-1 * * * *", "minutes", "'' is not a number"),
        ("+1 * * * *", "minutes", "'+1' is not a number"),
    ];
    for (text, field, reason) in cases {
        let e = Expression::parse(text).expect_err(text);
        assert_eq!(e.field(), *field, "{text}: {e}");
        assert!(e.reason().contains(reason), "{text}: {e}");
    }
}
