//! Service name patterns (PROTOCOL.md 6): the matcher agrees with the
//! reference dynamic program (the former matcher, O(pattern x name)) on
//! every valid pattern and name, and stays within its bound on steps,
//! `4 (wildcards + 1)(name + 1) + 4 pattern`. Bytes are mapped onto a small
//! alphabet (`a`, `b`, `/`, `*`, `?`) so that near misses are frequent.
#![no_main]

use cumulo_pattern as pattern;
use libfuzzer_sys::fuzz_target;

fn letters(bytes: &[u8], wild: bool) -> String {
    let alphabet: &[u8] = if wild { b"ab/*?" } else { b"ab/" };
    bytes.iter().map(|b| alphabet[*b as usize % alphabet.len()] as char).collect()
}

fuzz_target!(|input: (Vec<u8>, Vec<u8>)| {
    let (p, n) = input;
    let (p, n) = (letters(&p[..p.len().min(64)], true), letters(&n[..n.len().min(256)], false));
    if pattern::validate(&p).is_err() {
        return;
    }
    let (found, steps) = pattern::matches_counted(&p, &n);
    assert_eq!(found, pattern::reference_matches(&p, &n), "pattern {p:?} name {n:?}");
    let k = pattern::wildcard_count(&p) as u64;
    let bound = 4 * (k + 1) * (n.len() as u64 + 1) + 4 * p.len() as u64;
    assert!(steps <= bound, "{steps} steps over {bound} for pattern {p:?} name {n:?}");
});
