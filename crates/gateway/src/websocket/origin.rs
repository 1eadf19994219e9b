//! Which web pages may open a WebSocket (`origins` of a path). A browser
//! sends the page's Origin with every upgrade, and a WebSocket is not
//! covered by the same-origin policy: without this check any site the user
//! visits could open a connection with the user's cookies. Clients that are
//! not browsers send no Origin and are let through: they could send any
//! Origin they like anyway.

use hyper::header::{HeaderMap, HOST, ORIGIN};

/// `origins` of a WebSocket path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    /// Unset: the page must come from the host the request is for (the
    /// Origin's host and port equal the Host header's).
    SameHost,
    /// `["*"]`: any page.
    Any,
    /// These origins (`scheme://host[:port]`, lower case, no trailing `/`).
    Only(Vec<String>),
}

impl Origins {
    /// Reads the setting's list; an entry must be `*` or `scheme://host[:port]`.
    pub fn from_list(list: &[String]) -> Result<Origins, String> {
        if list.iter().any(|o| o == "*") {
            return Ok(Origins::Any);
        }
        let mut out = Vec::with_capacity(list.len());
        for o in list {
            let normal = normalize(o);
            if split(&normal).is_none() {
                return Err(format!(
                    "'{o}' is not an origin: write scheme://host[:port], e.g. \"https://app.example\""
                ));
            }
            out.push(normal);
        }
        Ok(Origins::Only(out))
    }

    /// None when the upgrade may go on; else the refused Origin.
    pub fn refuses<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        let origin = headers.get(ORIGIN)?;
        let text = origin.to_str().unwrap_or("(not text)");
        let allowed = match self {
            Origins::Any => true,
            Origins::Only(list) => list.contains(&normalize(text)),
            Origins::SameHost => same_host(text, headers.get(HOST).and_then(|h| h.to_str().ok())),
        };
        (!allowed).then_some(text)
    }
}

fn normalize(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// `scheme://host[:port]` → (scheme, host[:port]); None for `null` and
/// anything else that is not an origin.
fn split(origin: &str) -> Option<(&str, &str)> {
    let (scheme, authority) = origin.split_once("://")?;
    let ok = !scheme.is_empty() && !authority.is_empty() && !authority.contains(['/', '?', '#', '@', ' ']);
    ok.then_some((scheme, authority))
}

/// Whether the Origin's host and port are those of the Host header; a
/// missing port is the default one of the Origin's scheme on both sides.
fn same_host(origin: &str, host: Option<&str>) -> bool {
    let origin = normalize(origin);
    let (Some((scheme, authority)), Some(host)) = (split(&origin), host) else { return false };
    let default_port = match scheme {
        "https" | "wss" => "443",
        _ => "80",
    };
    let with_port = |a: &str| -> String {
        // An IPv6 literal ends in `]` when it has no port.
        let has_port = a.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
        if has_port {
            a.to_string()
        } else {
            format!("{a}:{default_port}")
        }
    };
    with_port(authority) == with_port(&host.trim().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(ORIGIN, o.parse().unwrap());
        }
        h
    }

    #[test]
    fn same_host_by_default() {
        let o = Origins::SameHost;
        assert_eq!(o.refuses(&headers(None, "a.example")), None, "no Origin: not a browser");
        assert_eq!(o.refuses(&headers(Some("https://a.example"), "a.example")), None);
        assert_eq!(o.refuses(&headers(Some("https://A.example:443"), "a.example")), None);
        assert_eq!(o.refuses(&headers(Some("http://127.0.0.1:8080"), "127.0.0.1:8080")), None);
        assert_eq!(o.refuses(&headers(Some("http://[::1]"), "[::1]:80")), None);
        let refused = [("https://evil.example", "a.example"), ("http://127.0.0.1:9", "127.0.0.1:8080"), ("null", "a")];
        for (origin, host) in refused {
            assert_eq!(o.refuses(&headers(Some(origin), host)), Some(origin), "{origin} on {host}");
        }
    }

    #[test]
    fn a_list_or_any() {
        let o = Origins::from_list(&["https://App.example/".into()]).unwrap();
        assert_eq!(o.refuses(&headers(Some("https://app.example"), "gw.example")), None);
        assert!(o.refuses(&headers(Some("http://app.example"), "gw.example")).is_some());
        assert!(o.refuses(&headers(Some("https://gw.example"), "gw.example")).is_some(), "the list replaces the host");
        let any = Origins::from_list(&["*".into()]).unwrap();
        assert_eq!(any.refuses(&headers(Some("https://evil.example"), "a")), None);
        assert!(Origins::from_list(&["app.example".into()]).is_err());
        assert!(Origins::from_list(&["https://app.example/path".into()]).is_err());
    }
}
