//! Service name → file to serve. A name is `prefix + path + "/" + method`
//! (the gateway's default mapping). The path is percent-decoded segment by
//! segment and checked before any file system call: a `..` segment, an
//! encoded `/` or a NUL is refused (403), a hidden segment (`.name`) is not
//! served (404). What is left can only name something under the directory;
//! symbolic links are checked after resolving (`lookup.rs`).

use percent_encoding::percent_decode_str;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// Why a name names no file to serve, and the HTTP status that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 403: the path tries to leave the directory or holds what no file name may.
    Forbidden(&'static str),
    /// 404: nothing is served there.
    NotFound(&'static str),
    /// 405: a method other than GET or HEAD.
    MethodNotAllowed(String),
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Forbidden(_) => 403,
            Refusal::NotFound(_) => 404,
            Refusal::MethodNotAllowed(_) => 405,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Forbidden(why) => format!("forbidden: {why}\n"),
            Refusal::NotFound(why) => format!("not found: {why}\n"),
            Refusal::MethodNotAllowed(m) => format!("method not allowed: '{m}' (this service serves GET and HEAD)\n"),
        }
    }
}

/// The request a name makes: the method and the decoded path segments
/// (none for the directory itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub method: Method,
    pub segments: Vec<String>,
}

impl Target {
    /// The cache key: the segments joined with `/`.
    pub fn key(&self) -> String {
        self.segments.join("/")
    }
}

/// Parses `name` (which starts with `prefix`, as the core routes it).
pub fn parse(name: &str, prefix: &str) -> Result<Target, Refusal> {
    let rest = name.strip_prefix(prefix).unwrap_or(name);
    let (path, method) = match rest.rsplit_once('/') {
        Some((path, method)) => (path, method),
        None => ("", rest),
    };
    let method = match method {
        "get" => Method::Get,
        "head" => Method::Head,
        other => return Err(Refusal::MethodNotAllowed(other.to_string())),
    };
    let mut segments = Vec::new();
    for raw in path.split('/') {
        let decoded = percent_decode_str(raw)
            .decode_utf8()
            .map_err(|_| Refusal::NotFound("the path is not UTF-8 once percent-decoded"))?;
        match &*decoded {
            "" | "." => continue,
            ".." => return Err(Refusal::Forbidden("'..' in the path")),
            s if s.contains(['/', '\\', '\0']) => {
                return Err(Refusal::Forbidden("an encoded '/', '\\' or NUL in a path segment"))
            }
            s if s.starts_with('.') => {
                return Err(Refusal::NotFound("hidden files (names starting with '.') are not served"))
            }
            s => segments.push(s.to_string()),
        }
    }
    Ok(Target { method, segments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(name: &str) -> (Method, String) {
        let t = parse(name, "/s/").unwrap_or_else(|e| panic!("{name}: {e:?}"));
        (t.method, t.key())
    }

    #[test]
    fn names_map_to_paths_under_the_directory() {
        assert_eq!(ok("/s/a.txt/get"), (Method::Get, "a.txt".into()));
        assert_eq!(ok("/s/css/site.css/head"), (Method::Head, "css/site.css".into()));
        assert_eq!(ok("/s//get"), (Method::Get, "".into()));
        assert_eq!(ok("/s/get"), (Method::Get, "".into()));
        assert_eq!(ok("/s/a%20b.txt/get"), (Method::Get, "a b.txt".into()));
        assert_eq!(ok("/s/./a//b/get"), (Method::Get, "a/b".into()));
    }

    #[test]
    fn ways_out_of_the_directory_are_refused() {
        for name in [
            "/s/../etc/passwd/get",
            "/s/a/../../x/get",
            "/s/%2e%2e/etc/passwd/get",
            "/s/%2E%2E/x/get",
            "/s/a%2f..%2f..%2fx/get",
            "/s/a%5c..%5cx/get",
            "/s/a%00.txt/get",
        ] {
            assert_eq!(parse(name, "/s/").unwrap_err().status(), 403, "{name}");
        }
        assert_eq!(parse("/s/.git/config/get", "/s/").unwrap_err().status(), 404);
        assert_eq!(parse("/s/%ff/get", "/s/").unwrap_err().status(), 404);
        assert_eq!(parse("/s/a.txt/post", "/s/").unwrap_err().status(), 405);
        assert_eq!(parse("/s/a.txt", "/s/").unwrap_err().status(), 405);
    }
}
