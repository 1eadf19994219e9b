//! Wildcard routing (PROTOCOL.md 6): `*` is one or more of any character,
//! `?` one or more except `/`; the most specific pattern wins.

use cumulo_e2e::*;

fn sub(tag: &str, pattern: &str) -> Service {
    ts!("/w/").env("TS_PATTERNS", pattern).env("TS_TAG", tag)
}

/// Which service answers `name` ("-" for NO_SERVICE).
fn who(api: &mut Api, name: &str) -> String {
    match api.send_sync(name, b"", b"", opts(5000)) {
        Ok(r) => field(&r, "tag"),
        Err(e) if e.status() == Some(Status::NoService) => "-".into(),
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn star_question_mark_and_most_specific_pattern() {
    let cfg = Config::new()
        .service(sub("star", "a/*"))
        .service(sub("qmark", "a/?"))
        .service(sub("exact", "a/b"))
        .service(sub("b_star", "a/b*"))
        .service(sub("q_c", "a/?/c"))
        .service(sub("mid", "m/?/end"));
    let core = Core::start(cfg);
    let mut api = core.client();
    let cases = [
        ("/w/a/b", "exact"),   // an exact pattern beats every wildcard
        ("/w/a/bc", "b_star"), // more literal characters win (6 vs 5)
        ("/w/a/x", "star"),    // a/* and a/? tie on literals: '*' < '?' wins
        ("/w/a/x/y", "star"),  // '?' does not match '/'
        ("/w/a/x/c", "q_c"),   // a/?/c has more literals than a/*
        ("/w/a/x/y/c", "star"),
        ("/w/a/", "-"), // '*' needs at least one character
        ("/w/m/k/end", "mid"),
        ("/w/m//end", "-"), // '?' needs at least one character
        ("/w/m/k/l/end", "-"),
        ("/w/b", "-"),
    ];
    let got: Vec<(&str, String)> = cases.iter().map(|(n, _)| (*n, who(&mut api, n))).collect();
    let want: Vec<(&str, String)> = cases.iter().map(|(n, w)| (*n, w.to_string())).collect();
    assert_eq!(got, want);
}

#[test]
fn the_matched_pattern_is_reported_with_its_prefix() {
    let core = Core::start(Config::new().service(sub("q", "u/?/i")));
    let mut api = core.client();
    let r = api.send_sync("/w/u/42/i", b"", b"", opts(5000)).unwrap();
    assert_eq!(field(&r, "pattern"), "/w/u/?/i");
    assert_eq!(field(&r, "name"), "/w/u/42/i");
}

#[test]
fn invalid_patterns_are_refused() {
    let core = Core::start(Config::new());
    let mut api = core.client_with_prefix("/p/");
    for bad in ["a/**", "a/*?", "a/?*", "a/??"] {
        let r = api.subscribe(bad, |_, _| Ok(cumulo::Answer::body("")));
        assert_eq!(status(&r), Status::InvalidArgument, "{bad}");
    }
    assert!(api.subscribe("a/*/b?", |_, _| Ok(cumulo::Answer::body(""))).is_ok());
}

/// Wildcard characters in a name are plain characters (PROTOCOL.md 6: they
/// "cannot be matched literally"); only an exact pattern, one without
/// wildcards, is looked up as such.
#[test]
fn a_name_equal_to_a_wildcard_pattern_is_not_an_exact_match() {
    let cfg = Config::new().service(sub("star", "*")).service(sub("qmark", "?"));
    let core = Core::start(cfg);
    let mut api = core.client();
    // Both /w/* and /w/? match the name "/w/?" as wildcards, with 2 literal
    // characters each; the lexicographically smaller "/w/*" must win.
    assert_eq!(who(&mut api, "/w/?"), "star");
}
