//! Service name patterns (PROTOCOL.md 6): `*` matches one or more characters
//! of any kind, `?` one or more characters other than `/`.

/// Checks a full pattern; the error says what is wrong.
pub fn validate(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("pattern is empty".into());
    }
    if pattern.contains('\0') {
        return Err("pattern contains a NUL byte".into());
    }
    let b = pattern.as_bytes();
    for w in b.windows(2) {
        if is_wild(w[0]) && is_wild(w[1]) {
            return Err(format!(
                "invalid pattern '{pattern}': two wildcards side by side ('{}{}')",
                w[0] as char, w[1] as char
            ));
        }
    }
    Ok(())
}

#[inline]
fn is_wild(c: u8) -> bool {
    c == b'*' || c == b'?'
}

pub fn has_wildcard(pattern: &str) -> bool {
    pattern.bytes().any(is_wild)
}

/// How specific a pattern is: its count of literal characters.
pub fn literal_len(pattern: &str) -> usize {
    pattern.bytes().filter(|&c| !is_wild(c)).count()
}

/// Does `name` match `pattern`? Dynamic programming over the set of name
/// positions reachable after each pattern character: O(pattern x name) in
/// every case, so no name a sender chooses can make matching blow up
/// (backtracking matchers are exponential on inputs like `*a*a*a*b`).
/// It runs only on a registry cache miss.
pub fn matches(pattern: &str, name: &str) -> bool {
    let n = name.as_bytes();
    let mut reach = vec![false; n.len() + 1];
    let mut next = vec![false; n.len() + 1];
    reach[0] = true;
    for &c in pattern.as_bytes() {
        next[0] = false;
        match c {
            b'*' => {
                let mut any = false;
                for j in 1..=n.len() {
                    any |= reach[j - 1];
                    next[j] = any;
                }
            }
            b'?' => {
                let mut carry = false;
                for j in 1..=n.len() {
                    carry = (carry || reach[j - 1]) && n[j - 1] != b'/';
                    next[j] = carry;
                }
            }
            lit => {
                for j in 1..=n.len() {
                    next[j] = reach[j - 1] && n[j - 1] == lit;
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
        if !reach.iter().any(|&r| r) {
            return false;
        }
    }
    reach[n.len()]
}

#[cfg(test)]
mod tests {
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
    ];

    #[test]
    fn matching_table() {
        for &(p, n, want) in TABLE {
            assert_eq!(matches(p, n), want, "pattern {p:?} name {n:?}");
        }
    }

    #[test]
    fn validation() {
        assert!(validate("/a/*/b/?").is_ok());
        for bad in ["", "/a/**", "/a/*?", "/a/?*", "/a/??"] {
            assert!(validate(bad).is_err(), "{bad}");
        }
        assert_eq!(literal_len("/a/*/bc"), 6);
    }
}
