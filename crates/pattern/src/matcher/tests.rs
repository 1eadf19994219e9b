use super::*;

/// (pattern, name, matches?)
const TABLE: &[(&str, &str, bool)] = &[
    ("/a/b", "/a/b", true),
    ("/a/b", "/a/bc", false),
    ("/a/*", "/a/b", true),
    ("/a/*", "/a/", false),
    ("/a/*", "/a/b/c", true),
    ("/a/?", "/a/b", true),
    ("/a/?", "/a/b/c", false),
    ("/a/?/c", "/a/bb/c", true),
    ("/a/?/c", "/a//c", false),
    ("/a/*/c", "/a/x/y/c", true),
    ("/a/*/c", "/a/x/y/d", false),
    ("*", "x", true),
    ("*", "", false),
    ("/t/*.xml/get", "/t/c.xml/get", true),
    ("/t/*.xml/get", "/t/.xml/get", false),
    ("/t/*.xml/*", "/t/a.xml/b.xml/get", true),
    ("/u/?/i/?", "/u/1/i/2", true),
    ("/u/?/i/?", "/u/1/i/2/3", false),
    ("/x*y", "/xay", true),
    ("/x*y", "/xy", false),
    ("/x*y", "/xayby", true),
    ("/*a*a*a*a*a*b", "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
    // Greedy leftmost placement is wrong after `?`: the first `b` leads the
    // `?` into a `/`, the second one works.
    ("*b?c", "xb/byc", true),
    ("*b?c", "xb/b/c", false),
    ("?b?c", "ab/byc", false),
    ("*/?/c", "a/b/x/c", true),
    ("*/?/c", "a/b/x/y/c", true),
    ("?/?", "a/b", true),
    ("?/?", "a/b/", false),
    ("?", "/", false),
    ("?", "ab", true),
    ("*", "/", true),
    ("a?", "a", false),
    ("a?", "a/", false),
    ("?a", "aa", true),
    ("?a", "a", false),
    ("*aa*aa", "aaaaaa", true),
    ("*aa*aa", "aaaaa", false),
    ("?aa?aa", "xaaxaa", true),
    ("?aa?aa", "xaa/xaa", false),
    ("*a/a*", "a/a/aa", true),
    ("*a/a*", "a/a/a", false),
    ("/p/?/q", "/p/x/y/q", false),
    ("/p/*/q", "/p/x/y/q", true),
    // Overlapping occurrences of a block: the one that lets the rest match
    // starts inside another.
    ("?aba?x", "zababa/x", false),
    ("?aba?x", "zababax", true),
    ("*aba?c", "xabab/abayc", true),
    ("x?ab?", "xab/abz", false),
    ("x?ab?", "xyabz", true),
    // The star runs over slashes, the question mark does not.
    ("*b?", "ab/b/", false),
    ("*b?", "ab/bc", true),
    ("*/b?c*", "a/b/c/bxc/d", true),
    // Wildcards around unicode.
    ("/é/?", "/é/ü", true),
    ("/*é", "/aé", true),
];

#[test]
fn matching_table() {
    for &(p, n, want) in TABLE {
        validate(p).unwrap();
        assert_eq!(matches(p, n), want, "pattern {p:?} name {n:?}");
        assert_eq!(reference_matches(p, n), want, "reference: pattern {p:?} name {n:?}");
    }
}

#[test]
fn validation() {
    assert!(validate("/a/*/b/?").is_ok());
    for bad in ["", "/a/**", "/a/*?", "/a/?*", "/a/??", "/a/\0"] {
        assert!(validate(bad).is_err(), "{bad}");
    }
    assert_eq!(literal_len("/a/*/bc"), 6);
    assert_eq!((literal_prefix("/a/*/bc"), literal_suffix("/a/*/bc")), ("/a/", "/bc"));
    assert_eq!((literal_prefix("/a/b"), literal_suffix("*")), ("/a/b", ""));
    assert_eq!(wildcard_count("/a/*/b?c/*"), 3);
}

#[test]
fn limits_refuse_with_a_clear_message() {
    let l = NameLimits { max_name: 16, max_pattern: 12, max_wildcards: 2 };
    assert!(l.check_name("/a/b").is_ok());
    assert!(l.check_name("/a*?").is_ok(), "a name may hold wildcard characters");
    let e = l.check_name("").unwrap_err();
    assert!(e.contains("empty"), "{e}");
    let e = l.check_name("/a\0b").unwrap_err();
    assert!(e.contains("NUL") && e.contains("/a\\0b"), "{e}");
    let e = l.check_name(&"x".repeat(17)).unwrap_err();
    assert!(e.contains("17 bytes") && e.contains("limit of 16") && e.contains("core.max_name"), "{e}");
    assert!(l.check_pattern("/a/*/b?").is_ok());
    let e = l.check_pattern("/a/*/b?/*").unwrap_err();
    assert!(e.contains("3 wildcards") && e.contains("core.max_wildcards"), "{e}");
    let e = l.check_pattern(&"y".repeat(13)).unwrap_err();
    assert!(e.contains("13 bytes") && e.contains("core.max_pattern"), "{e}");
    assert!(l.check_pattern("/a/**").unwrap_err().contains("side by side"));
    // A long string is quoted only in part.
    let e = NameLimits::default().check_name(&"é".repeat(10_000)).unwrap_err();
    assert!(e.len() < 300, "{} bytes: {e}", e.len());
}

/// A random valid pattern over a small alphabet, so that near misses are
/// frequent.
fn random_pattern(rng: &mut fastrand::Rng, alphabet: &[u8]) -> String {
    let len = rng.usize(1..=10);
    let mut p = Vec::with_capacity(len);
    for _ in 0..len {
        let prev_wild = p.last().is_some_and(|&c| is_wild(c));
        let c = match rng.u8(0..10) {
            0 | 1 if !prev_wild => b'*',
            2 | 3 if !prev_wild => b'?',
            _ => alphabet[rng.usize(..alphabet.len())],
        };
        p.push(c);
    }
    String::from_utf8(p).unwrap()
}

fn random_name(rng: &mut fastrand::Rng, alphabet: &[u8]) -> String {
    let len = rng.usize(0..=14);
    String::from_utf8((0..len).map(|_| alphabet[rng.usize(..alphabet.len())]).collect()).unwrap()
}

#[test]
fn agrees_with_the_reference_on_random_inputs() {
    let mut rng = fastrand::Rng::with_seed(0x5eed_c0de);
    let mut matched = 0;
    for round in 0..300_000 {
        let alphabet: &[u8] = if round % 2 == 0 { b"ab/" } else { b"a/" };
        let p = random_pattern(&mut rng, alphabet);
        assert!(validate(&p).is_ok(), "{p}");
        // Names built from the pattern match more often than random ones.
        let n = if round % 3 == 0 {
            let fill = |_: &mut fastrand::Rng| alphabet[0] as char;
            p.chars()
                .map(|c| match c {
                    '*' | '?' => (0..rng.usize(1..4)).map(|_| fill(&mut rng)).collect::<String>(),
                    c => c.to_string(),
                })
                .collect()
        } else {
            random_name(&mut rng, alphabet)
        };
        let want = reference_matches(&p, &n);
        matched += want as u32;
        assert_eq!(matches(&p, &n), want, "pattern {p:?} name {n:?}");
    }
    assert!(matched > 10_000, "the inputs match often enough to test both answers ({matched})");
}

/// Each way of matching (`Way`) taken at every step it can be, against
/// the reference: small alphabets and names of many short runs, longer than a
/// bitmap word so that carries cross words.
#[test]
fn every_way_agrees_with_the_reference() {
    let mut rng = fastrand::Rng::with_seed(0xb175);
    let mut matched = 0;
    for round in 0..60_000 {
        let alphabet: &[u8] = if round % 2 == 0 { b"ab/" } else { b"a/" };
        let mut p = String::new();
        for _ in 0..rng.usize(1..4) {
            p.push_str(&random_pattern(&mut rng, alphabet));
        }
        if validate(&p).is_err() {
            continue;
        }
        let n: String = if round % 3 == 0 {
            p.chars()
                .map(|c| match c {
                    '*' | '?' => (0..rng.usize(1..80)).map(|_| alphabet[rng.usize(..alphabet.len())] as char).collect(),
                    c => c.to_string(),
                })
                .collect()
        } else {
            let unit = random_name(&mut rng, alphabet);
            unit.repeat(rng.usize(1..(1 + 300 / (unit.len() + 1))))
        };
        let want = reference_matches(&p, &n);
        matched += want as u32;
        for way in [Way::Scan, Way::PerStart, Way::Bitmap] {
            assert_eq!(Name::forcing(&n, way).matches(&p), want, "{way:?}: pattern {p:?} name {n:?}");
        }
        assert_eq!(matches(&p, &n), want, "pattern {p:?} name {n:?}");
    }
    assert!(matched > 2_000, "the inputs match often enough to test both answers ({matched})");
}

#[test]
fn one_prepared_name_answers_many_patterns() {
    let name = format!("/{}b", "aaa/".repeat(100));
    let mut prepared = Name::new(&name);
    for p in ["/*aa/?aa/?b", "/*aa/?aa/?aa/*b", "/*a/?b", "/?/*", "/a*", "/*aa/?aa/?aa/?aa/?aa/?aa/?aa/?aa/?b"] {
        assert_eq!(prepared.matches(p), reference_matches(p, &name), "{p}");
        for way in [Way::Scan, Way::PerStart, Way::Bitmap] {
            assert_eq!(Name::forcing(&name, way).matches(p), reference_matches(p, &name), "{way:?}: {p}");
        }
    }
}

/// The worst case of the old matcher was pattern x name steps; this one
/// stays within `4 (k + 1)(name + 1) + 4 pattern` for k wildcards.
fn bound(pattern: &str, name: &str) -> u64 {
    let k = wildcard_count(pattern) as u64;
    4 * (k + 1) * (name.len() as u64 + 1) + 4 * pattern.len() as u64
}

fn check_bound(pattern: &str, name: &str) -> u64 {
    let (found, steps) = matches_counted(pattern, name);
    assert!(
        steps <= bound(pattern, name),
        "{steps} steps for a {}-byte pattern ({} wildcards) on a {}-byte name, over {}",
        pattern.len(),
        wildcard_count(pattern),
        name.len(),
        bound(pattern, name)
    );
    if pattern.len() * name.len() <= 4_000_000 {
        assert_eq!(found, reference_matches(pattern, name), "pattern {pattern:.40}... name {name:.40}...");
    }
    steps
}

#[test]
fn steps_are_bounded_on_adversarial_inputs() {
    let n = DEFAULT_MAX_NAME as usize;
    let max_p = DEFAULT_MAX_PATTERN as usize;
    let a = |k: usize| "a".repeat(k);
    let mut cases: Vec<(String, String)> = vec![
        // One star then a long literal, against a name that almost matches.
        (format!("*{}", a(max_p - 1)), format!("{}b", a(n - 1))),
        (format!("*{}b", a(max_p - 2)), a(n)),
        (format!("?{}b", a(max_p - 2)), a(n)),
        (format!("{}*", a(max_p - 1)), format!("b{}", a(n - 1))),
        // Many wildcards each before a short block (over the default limit
        // too: the bound is per wildcard).
        ("*a".repeat(max_p / 2), format!("{}b", a(n - 1))),
        ("?a".repeat(max_p / 2), format!("{}b", a(n - 1))),
        ("?a".repeat(max_p / 2), "a/".repeat(n / 2)),
        ("*a?".repeat(max_p / 3), "a/".repeat(n / 2)),
        (format!("{}b", "?a/".repeat(16)), "a/".repeat(n / 2)),
        (format!("{}b", "*a/".repeat(16)), "a/".repeat(n / 2)),
        (format!("{}b", "?aa/a".repeat(16)), "aa/a".repeat(n / 4)),
        // Blocks that overlap themselves, between question marks.
        (format!("?{}?{}?x", "ab".repeat(500), "ab".repeat(500)), format!("{}/", "ab".repeat(n / 2 - 1))),
        (format!("?{}?b", "a/".repeat(1000)), "a/".repeat(n / 2)),
        (format!("*{}?b", "a/".repeat(1000)), "a/".repeat(n / 2)),
    ];
    // The worst allowed: the default wildcard limit, blocks a name may hold
    // many times, names of the default limit.
    for w in ["*", "?"] {
        for block in ["a", "a/", "aa/a", "/"] {
            let p = format!("{}{}", format!("{w}{block}").repeat(DEFAULT_MAX_WILDCARDS as usize), "b");
            cases.push((p, block.repeat(n / block.len())));
        }
    }
    for (p, name) in &cases {
        check_bound(p, name);
    }
    // With at most 16 wildcards a match reads each byte a few dozen times
    // at most, where the old matcher read the name once per pattern byte.
    let k = DEFAULT_MAX_WILDCARDS as u64;
    let p = format!("{}b", "?a/".repeat(k as usize));
    let name = "a/".repeat(n / 2);
    let (_, steps) = matches_counted(&p, &name);
    assert!(steps <= 4 * (k + 1) * (n as u64 + 1) + 4 * p.len() as u64);
    assert!(steps < (p.len() * name.len()) as u64 / 2, "well under the old pattern x name ({steps})");
}

#[test]
fn steps_are_bounded_on_random_inputs() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2_000 {
        let alphabet: &[u8] = b"ab/";
        let mut p = String::new();
        for _ in 0..rng.usize(1..40) {
            p.push_str(&random_pattern(&mut rng, alphabet));
            if validate(&p).is_err() {
                p.pop();
            }
        }
        let unit = random_name(&mut rng, alphabet);
        let name = unit.repeat(1 + 2000 / (unit.len() + 1));
        check_bound(&p, &name);
    }
}
