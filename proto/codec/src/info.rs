//! The key/value encoding of request_info and response_info
//! (PROTOCOL.md 5): `key\0value\0...`.

/// Appends one pair.
pub fn push(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.extend_from_slice(key);
    out.push(0);
    out.extend_from_slice(value);
    out.push(0);
}

/// Encodes pairs in order.
pub fn encode<K: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(K, V)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in pairs {
        push(&mut out, k.as_ref(), v.as_ref());
    }
    out
}

/// Why a key/value buffer is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoError(pub &'static str);

impl std::fmt::Display for InfoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed key/value data: {}", self.0)
    }
}
impl std::error::Error for InfoError {}

/// Iterates the pairs without copying; yields an error (once) on a
/// malformed buffer and never reads past it.
pub struct Pairs<'a> {
    rest: &'a [u8],
    failed: bool,
}

pub fn parse(buf: &[u8]) -> Pairs<'_> {
    Pairs { rest: buf, failed: false }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = Result<(&'a [u8], &'a [u8]), InfoError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let split = |b: &'a [u8]| b.iter().position(|&c| c == 0).map(|i| (&b[..i], &b[i + 1..]));
        let result = match split(self.rest) {
            None => Err(InfoError("key without NUL terminator")),
            Some((key, rest)) => match split(rest) {
                None => Err(InfoError("key without a NUL-terminated value")),
                Some((value, rest)) => {
                    self.rest = rest;
                    Ok((key, value))
                }
            },
        };
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

/// One key/value pair, both borrowed from the buffer.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// Collects all pairs, or the first error.
pub fn parse_all(buf: &[u8]) -> Result<Vec<Pair<'_>>, InfoError> {
    parse(buf).collect()
}

/// The first value of `key`, if the buffer is well formed up to it (use
/// [`parse_all`] first to insist that all of it is).
pub fn get<'a>(buf: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    parse(buf).map_while(Result::ok).find(|(k, _)| *k == key).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse() {
        let buf = encode(&[("a", "1"), ("a", ""), ("content-type", "text/xml")]);
        assert_eq!(buf, b"a\x001\x00a\x00\x00content-type\x00text/xml\x00");
        let pairs = parse_all(&buf).unwrap();
        assert_eq!(pairs.len(), 3);
        assert_eq!(get(&buf, b"content-type"), Some(&b"text/xml"[..]));
        assert_eq!(get(&buf, b"missing"), None);
    }

    #[test]
    fn malformed_is_an_error_never_a_read_past_the_end() {
        for bad in [&b"k"[..], b"k\x00", b"k\x00v", b"k\x00v\x00k2"] {
            assert!(parse_all(bad).is_err(), "{bad:?}");
        }
        assert!(parse_all(b"").unwrap().is_empty());
    }
}
