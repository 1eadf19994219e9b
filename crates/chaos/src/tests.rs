use crate::{Chaos, Fate, Settings};

fn table(s: &str) -> toml::Table {
    toml::from_str(s).unwrap()
}

#[test]
fn settings_are_checked_with_their_field_and_reason() {
    let ok = Settings::from_settings(&table("fail = 0.25\ndelay = 0.5\ndelay_ms = 20\nseed = 7")).unwrap();
    assert_eq!((ok.fail, ok.delay, ok.delay_ms, ok.seed, ok.pattern.as_str()), (0.25, 0.5, 20, Some(7), "*"));
    for (s, why) in [
        ("fail = 1.5", "chaos: fail: must be a share"),
        ("drop = -0.1", "chaos: drop: must be a share"),
        ("fail = 0.6\nexit = 0.6", "chaos: fail + drop + exit + delay"),
        ("delay = 0.1", "chaos: delay_ms: needed with delay"),
        ("delay_ms = 700000", "chaos: delay_ms: must be"),
        ("colour = 1", "chaos: colour: unknown setting"),
        ("pattern = \"\"", "chaos: pattern"),
        ("seed = -1", "chaos: seed"),
    ] {
        let e = Settings::from_settings(&table(s)).unwrap_err();
        assert!(e.starts_with(why), "{s}: {e}");
    }
}

#[test]
fn the_fates_come_in_their_shares() {
    let mut c =
        Chaos::from_settings(&table("fail = 0.1\ndrop = 0.2\nexit = 0.05\ndelay = 0.3\ndelay_ms = 1\nseed = 42"))
            .unwrap();
    let n = 100_000;
    let mut counts = std::collections::HashMap::new();
    for _ in 0..n {
        *counts.entry(c.draw()).or_insert(0u32) += 1;
    }
    for (fate, share) in
        [(Fate::Fail, 0.1), (Fate::Drop, 0.2), (Fate::Exit, 0.05), (Fate::Delay, 0.3), (Fate::Answer, 0.35)]
    {
        let got = counts.get(&fate).copied().unwrap_or(0) as f64 / n as f64;
        assert!((got - share).abs() < 0.01, "{fate:?}: {got} against {share}");
    }
    // Nothing configured: every request answered.
    let mut calm = Chaos::from_settings(&table("")).unwrap();
    assert!((0..1000).all(|_| calm.draw() == Fate::Answer));
}

#[test]
fn a_seed_repeats_the_same_fates() {
    let draws = || {
        let mut c = Chaos::from_settings(&table("fail = 0.5\nseed = 3")).unwrap();
        (0..64).map(|_| c.draw()).collect::<Vec<_>>()
    };
    assert_eq!(draws(), draws());
}
