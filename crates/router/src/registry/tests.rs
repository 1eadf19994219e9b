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

/// Names at the default `core.max_name`, and one peer's patterns at the
/// default `core.max_subscriptions` and `core.max_wildcards`, every one of
/// them a candidate (its literal prefix starts the name, its suffix ends
/// it) that fails only at its last wildcard: the worst this registry can be
/// given, in four shapes. Returns (wildcard patterns, the lookup's cost, its
/// time, the steps and time of the forward scan alone, the matcher before
/// the per-start and bitmap ways, on the same candidates).
fn adversarial_lookup(patterns: &dyn Fn(usize) -> String, name: &str) -> (usize, Cost, Duration, u64, Duration) {
    let limits = pattern::NameLimits::default();
    assert!(limits.check_name(name).is_ok());
    let mut r = Registry::default();
    for i in 0..1024 {
        let p = patterns(i);
        assert!(limits.check_pattern(&p).is_ok(), "{p}");
        assert_eq!(pattern::wildcard_count(&p), 8);
        r.subscribe(&p, 1);
    }
    // The least of a few runs (after the first, the cache is cleared), as
    // other processes share the machine; one run in debug builds.
    let runs = if cfg!(debug_assertions) { 1 } else { 5 };
    let mut elapsed = Duration::MAX;
    for _ in 0..runs {
        r.cache.clear();
        r.cost.set(Cost::default());
        let started = Instant::now();
        assert!(r.lookup(name).is_none());
        elapsed = elapsed.min(started.elapsed());
    }
    let started = Instant::now();
    let scan: u64 = r
        .candidates(name)
        .into_iter()
        .map(|p| {
            let (found, steps) = pattern::Name::scan_only(name).matches_counted(p);
            assert!(!found);
            steps
        })
        .sum();
    (r.wildcard_count(), r.cost.get(), elapsed, scan, started.elapsed())
}

/// A cache miss at the default limits tries every candidate, each in a
/// bounded number of steps (bytes scanned, words of bitmap, words
/// compared), and far fewer than the forward scan alone took: where it
/// looked for each block through the whole name, the matcher now looks
/// into the runs its live positions are in, or moves 64 positions per
/// step through a bitmap, whichever costs less.
///
/// Measured once with `cargo test --release -p cumulo-router adversarial
/// -- --nocapture` on the 2-CPU development machine while other builds ran
/// (load average 7.7), the least of 5 lookups: 0.4, 1.7, 5.3, 4.5 and
/// 4.2 ms for the five shapes below (blocks of 20 bytes, where the bitmap
/// and the per-start ways cost the same, are the worst of the sizes from 4
/// to 100 bytes); the forward scan alone, as the registry ran it before:
/// 0.4, 94, 81, 47 and 43 ms.
#[test]
fn a_lookup_at_the_default_limits_is_bounded_in_steps_adversarial() {
    let a = |k: usize| "a".repeat(k);
    let n = pattern::DEFAULT_MAX_NAME as usize;
    // Names of runs of `a`s, and patterns whose blocks fit in every run:
    // after the first `*` the live positions are one per run, and every `?`
    // keeps them so, up to the last `?b` (the name's last run has no byte
    // before its `b`). Distinct patterns: up to 15 runs in the literal
    // prefix, and each `?` block one `a` shorter or not.
    let runs = |u: usize| {
        let unit = format!("{}/", a(u + 3));
        let name = format!("/{}b", unit.repeat((n - 2) / unit.len()));
        let patterns = move |i: usize| {
            let blocks: String = (0..6).map(|b| format!("?{}/", a(u - 1 - (((i / 16) >> b) & 1)))).collect();
            format!("/{}*{}/{blocks}?b", unit.repeat(i % 16), a(u))
        };
        (name, patterns)
    };
    let mut shapes: Vec<Adversary> = vec![(
        "`*a` blocks on a name of `a`s".into(),
        format!("/{}b", a(n - 2)),
        Box::new(move |i| format!("/{}{}*c*b", "a".repeat(i), "*a".repeat(6))),
    )];
    for u in [4, 20, 64, 100] {
        let (name, patterns) = runs(u);
        shapes.push((format!("`?` blocks of {u} bytes on runs of {}", u + 3), name, Box::new(patterns)));
    }
    for (what, name, patterns) in &shapes {
        let (held, cost, elapsed, scan, scan_elapsed) = adversarial_lookup(patterns, name);
        eprintln!("{what}: {cost:?} in {elapsed:?}; the scan alone: {scan} steps in {scan_elapsed:?}");
        assert_eq!((held, cost.tried), (1024, 1024), "{what}: every pattern is a candidate");
        assert!(cost.steps <= LOOKUP_STEPS, "{what}: {} steps", cost.steps);
        if !what.starts_with("`*a`") {
            assert!(cost.steps * 3 < scan, "{what}: {} steps, the scan alone {scan}", cost.steps);
        }
    }
}

/// What it does, the name, the patterns.
type Adversary = (String, String, Box<dyn Fn(usize) -> String>);

/// Steps one cache miss may take at the default limits (measured: at most
/// about 6 million, the forward scan alone up to 70 million).
const LOOKUP_STEPS: u64 = 16_000_000;
