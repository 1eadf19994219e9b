//! Which service name an HTTP request goes to:
//! `name_prefix + path + "/" + lower-case method` (the method part only with
//! `method_suffix = true`). `GET /tests/http_req/c.xml?value=42` is sent to
//! `/tests/http_req/c.xml/get`, so one service can subscribe per method.
//! The path is used as sent: percent-escapes are not decoded, so every
//! request path is a valid name and two spellings never collide silently.

use hyper::Method;

#[derive(Debug, Clone)]
pub struct NameMapping {
    pub name_prefix: String,
    pub method_suffix: bool,
}

impl NameMapping {
    pub fn service_name(&self, method: &Method, path: &str) -> String {
        let mut name = String::with_capacity(self.name_prefix.len() + path.len() + 8);
        name.push_str(&self.name_prefix);
        name.push_str(path);
        if self.method_suffix {
            name.push('/');
            push_lower_case(&mut name, method.as_str());
        }
        name
    }
}

fn push_lower_case(out: &mut String, s: &str) {
    out.extend(s.chars().map(|c| c.to_ascii_lowercase()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_becomes_a_lower_case_suffix() {
        let m = NameMapping { name_prefix: String::new(), method_suffix: true };
        assert_eq!(m.service_name(&Method::GET, "/tests/http_req/c.xml"), "/tests/http_req/c.xml/get");
        assert_eq!(m.service_name(&Method::POST, "/calculator/add"), "/calculator/add/post");
        let custom = Method::from_bytes(b"PURGE").unwrap();
        assert_eq!(m.service_name(&custom, "/x"), "/x/purge");
    }

    #[test]
    fn prefix_and_no_suffix() {
        let m = NameMapping { name_prefix: "/api".into(), method_suffix: false };
        assert_eq!(m.service_name(&Method::DELETE, "/users/7"), "/api/users/7");
    }
}
