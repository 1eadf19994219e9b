use super::*;

#[test]
fn exact_beats_wildcards_and_most_literal_wildcard_wins() {
    let mut r = Registry::default();
    r.subscribe("/a/*", 1);
    r.subscribe("/a/b/*", 2);
    r.subscribe("/a/b/c", 3);
    assert_eq!(r.lookup("/a/b/c").unwrap().instances, vec![3]);
    assert_eq!(r.lookup("/a/b/d").unwrap().instances, vec![2]);
    assert_eq!(r.lookup("/a/x").unwrap().instances, vec![1]);
    assert!(r.lookup("/b").is_none());
    // cached answers follow registry changes
    assert!(r.unsubscribe("/a/b/*", 2));
    assert_eq!(r.lookup("/a/b/d").unwrap().instances, vec![1]);
}

#[test]
fn counts_and_multicast() {
    let mut r = Registry::default();
    r.subscribe("/m/x", 1);
    r.subscribe("/m/x", 1);
    r.subscribe("/m/*", 2);
    r.subscribe("/m/*", 1);
    assert_eq!(r.count("/m/x", 1), 2);
    let all = r.lookup_all("/m/x");
    assert_eq!(all.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(&*all[0].1, "/m/x");
    assert!(r.unsubscribe("/m/x", 1));
    assert_eq!(r.count("/m/x", 1), 1);
    assert!(!r.unsubscribe("/m/y", 1));
}

#[test]
fn equal_literal_counts_go_to_the_lexicographically_smallest() {
    let mut r = Registry::default();
    r.subscribe("/q/?/b", 1);
    r.subscribe("/q/a/?", 2);
    r.subscribe("*q/a/b", 3);
    // All three have 5 literal characters; `*` sorts before `/`.
    assert_eq!(&*r.lookup("/q/a/b").unwrap().pattern, "*q/a/b");
    assert!(r.unsubscribe("*q/a/b", 3));
    assert_eq!(&*r.lookup("/q/a/b").unwrap().pattern, "/q/?/b");
    let all: Vec<_> = r.lookup_all("/q/a/b").into_iter().map(|(i, p)| (i, p.to_string())).collect();
    assert_eq!(all, [(1, "/q/?/b".to_string()), (2, "/q/a/?".to_string())]);
}

/// Today's rule, by brute force over every pattern: exact first, else the
/// matching wildcard pattern with the most literal characters, then the
/// lexicographically smallest.
fn brute_force(patterns: &[(String, InstanceId)], name: &str) -> Option<String> {
    if patterns.iter().any(|(p, _)| p == name && !pattern::has_wildcard(p)) {
        return Some(name.to_string());
    }
    let mut wild: Vec<&String> = patterns
        .iter()
        .map(|(p, _)| p)
        .filter(|p| pattern::has_wildcard(p) && pattern::reference_matches(p, name))
        .collect();
    wild.sort_by(|a, b| pattern::literal_len(b).cmp(&pattern::literal_len(a)).then_with(|| a.cmp(b)));
    wild.first().map(|p| p.to_string())
}

#[test]
fn the_index_gives_the_same_answers_as_trying_every_pattern() {
    let mut rng = fastrand::Rng::with_seed(42);
    let alphabet = ['a', 'b', '/', '*', '?'];
    let word = |rng: &mut fastrand::Rng, wild: bool| -> String {
        let mut s = String::new();
        for _ in 0..rng.usize(1..8) {
            let c = alphabet[rng.usize(..if wild { 5 } else { 3 })];
            let prev_wild = s.ends_with(['*', '?']);
            if !(prev_wild && (c == '*' || c == '?')) {
                s.push(c);
            }
        }
        s
    };
    let mut r = Registry::default();
    let mut subs: Vec<(String, InstanceId)> = Vec::new();
    for step in 0..4_000 {
        // Up to a few hundred patterns: enough for many overlaps.
        if subs.is_empty() || (subs.len() < 300 && rng.u8(..3) > 0) {
            let p = format!("/{}", word(&mut rng, true));
            let id = rng.u32(1..6);
            r.subscribe(&p, id);
            subs.push((p, id));
        } else {
            let (p, id) = subs.swap_remove(rng.usize(..subs.len()));
            assert!(r.unsubscribe(&p, id));
        }
        for _ in 0..3 {
            let name = format!("/{}", word(&mut rng, step % 5 == 0));
            let want = brute_force(&subs, &name);
            assert_eq!(r.serves(&name), want.is_some(), "serves {name:?}");
            let got = r.lookup(&name).map(|e| e.pattern.to_string());
            assert_eq!(got, want, "name {name:?}");
            let mut all: Vec<InstanceId> = r.lookup_all(&name).into_iter().map(|(i, _)| i).collect();
            let mut want_all: Vec<InstanceId> = subs
                .iter()
                .filter(
                    |(p, _)| {
                        if pattern::has_wildcard(p) {
                            pattern::reference_matches(p, &name)
                        } else {
                            **p == name
                        }
                    },
                )
                .map(|(_, i)| *i)
                .collect();
            all.sort();
            want_all.sort();
            want_all.dedup();
            assert_eq!(all, want_all, "multicast to {name:?}");
        }
    }
}

#[test]
fn a_lookup_tries_only_patterns_whose_literal_parts_fit_the_name() {
    let mut r = Registry::default();
    // Many heavy patterns under one prefix...
    for i in 0..4096 {
        r.subscribe(&format!("/evil/{i}*a?a*a?a*b"), 1);
    }
    r.subscribe("/good/*", 2);
    assert_eq!(r.wildcard_count(), 4097);
    // ...are never tried for names elsewhere,
    assert_eq!(r.candidates("/good/x").len(), 1);
    assert_eq!(r.candidates("/evil").len(), 0);
    // nor for names under their prefix that their literal prefix or suffix
    // or their length rules out.
    assert_eq!(r.candidates("/evil/17aaaaaaaaaaab").len(), 2, "/evil/1* and /evil/17*");
    assert_eq!(r.candidates("/evil/17aaaaaaaaaaac").len(), 0);
    assert_eq!(r.candidates("/evil/17a").len(), 0);
    assert_eq!(r.lookup("/evil/17aaaaaaaaaaab").unwrap().pattern.as_ref(), "/evil/17*a?a*a?a*b");
    for i in 0..4096 {
        assert!(r.unsubscribe(&format!("/evil/{i}*a?a*a?a*b"), 1));
    }
    assert_eq!(r.wildcard_count(), 1);
    assert_eq!(&*r.lookup("/good/evil").unwrap().pattern, "/good/*");
}

#[test]
fn the_name_cache_is_bounded_in_bytes_and_in_count() {
    let mut r = Registry::default();
    r.subscribe("/c/*x", 1);
    let long = "n".repeat(8000);
    for i in 0..5000 {
        assert!(r.lookup(&format!("/c/{i}{long}")).is_none());
        assert!(r.cache.bytes <= CACHE_BYTES);
        let held: usize = r.cache.map.keys().map(|k| k.len() + CACHE_ENTRY_OVERHEAD).sum();
        assert_eq!(held, r.cache.bytes);
    }
    for i in 0..CACHE_LIMIT + 10 {
        r.lookup(&format!("/c/{i}x"));
        assert!(r.cache.map.len() <= CACHE_LIMIT);
    }
    assert_eq!(&*r.lookup("/c/yx").unwrap().pattern, "/c/*x", "answers stay right across clears");
}

#[test]
fn memory_is_given_back_after_large_releases_at_most_once_a_second() {
    let mut r = Registry::default();
    let t0 = Instant::now();
    for i in 0..2 * TRIM_AFTER {
        r.subscribe(&format!("/t/{i}/*"), 1);
    }
    assert!(!r.give_back_memory(t0), "nothing released yet");
    for i in 0..TRIM_AFTER {
        r.unsubscribe(&format!("/t/{i}/*"), 1);
    }
    assert!(r.give_back_memory(t0));
    for i in TRIM_AFTER..2 * TRIM_AFTER {
        r.unsubscribe(&format!("/t/{i}/*"), 1);
    }
    assert!(!r.give_back_memory(t0 + Duration::from_millis(500)), "rate-limited");
    assert!(r.give_back_memory(t0 + Duration::from_millis(1500)), "deferred, not lost");
    assert!(r.entries.capacity() < 1024, "the table shrank: {}", r.entries.capacity());
}
