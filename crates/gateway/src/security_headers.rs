//! `security_headers = true`: the headers a browser needs to keep a page
//! from being sniffed, framed or leaking its URL, added to every answer
//! that does not set them itself (a service's own value always wins).
//! Strict-Transport-Security only over TLS: sent over plain HTTP it would
//! be ignored, and it would be wrong on a gateway that only speaks HTTP.

use hyper::header::{HeaderMap, HeaderName, HeaderValue};

const ALWAYS: [(&str, &str); 3] =
    [("x-content-type-options", "nosniff"), ("x-frame-options", "DENY"), ("referrer-policy", "no-referrer")];
const HSTS: (&str, &str) = ("strict-transport-security", "max-age=31536000");

/// Adds each header `headers` does not hold yet; HSTS when `tls`.
pub fn add(headers: &mut HeaderMap, tls: bool) {
    let hsts = tls.then_some(HSTS);
    for (name, value) in ALWAYS.into_iter().chain(hsts) {
        headers.entry(HeaderName::from_static(name)).or_insert(HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_where_absent_and_a_services_own_value_kept() {
        let mut h = HeaderMap::new();
        h.insert("x-frame-options", HeaderValue::from_static("SAMEORIGIN"));
        add(&mut h, false);
        assert_eq!(h["x-frame-options"], "SAMEORIGIN");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert!(!h.contains_key("strict-transport-security"), "no HSTS over plain HTTP");
        add(&mut h, true);
        assert_eq!(h["strict-transport-security"], "max-age=31536000");
    }
}
