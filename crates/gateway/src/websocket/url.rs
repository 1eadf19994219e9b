//! Names built from a connection's URL: its own name, and the extra names
//! of `subscriptions` (templates with `{path}` and `{query-key}`).

use crate::request::query_to_key_value;
use cumulo_proto::info;

/// Expands each template with the URL's path and query parameters
/// (URL-decoded, the first value of a repeated key). A template naming a
/// parameter the URL lacks is skipped. A value that would put a wildcard
/// (`*`, `?`) or a NUL into a name is refused: a browser must not subscribe
/// patterns that catch other connections' traffic.
pub fn expand(templates: &[String], path: &str, query: &str) -> Result<Vec<String>, String> {
    if templates.is_empty() {
        return Ok(Vec::new());
    }
    let pairs = query_to_key_value(query)?;
    let params = info::parse_all(&pairs).map_err(|e| e.to_string())?;
    let lookup = |key: &str| -> Option<&[u8]> {
        if key == "path" {
            return Some(path.as_bytes());
        }
        params.iter().find(|(k, _)| *k == key.as_bytes()).map(|(_, v)| *v)
    };
    let mut out = Vec::with_capacity(templates.len());
    'templates: for t in templates {
        let mut name = String::with_capacity(t.len() + 16);
        let mut rest = t.as_str();
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else { break };
            name.push_str(&rest[..open]);
            let key = &rest[open + 1..open + close];
            let Some(value) = lookup(key) else { continue 'templates };
            let value = std::str::from_utf8(value).map_err(|_| format!("the URL's '{key}' is not UTF-8"))?;
            if value.is_empty() || value.contains(['*', '?', '\0']) {
                return Err(format!("the URL's '{key}' must be non-empty and hold no '*' or '?': it makes a name"));
            }
            name.push_str(value);
            rest = &rest[open + close + 1..];
        }
        name.push_str(rest);
        out.push(name);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::expand;

    fn t(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn templates_take_path_and_query() {
        let got = expand(&t(&["/chat/room/{room}", "/all{path}", "/u/{user}/{room}"]), "/ws", "room=lobby&user=al%20i")
            .unwrap();
        assert_eq!(got, ["/chat/room/lobby", "/all/ws", "/u/al i/lobby"]);
    }

    #[test]
    fn missing_parameters_skip_and_wildcards_refuse() {
        assert_eq!(expand(&t(&["/r/{room}", "/fixed"]), "/ws", "").unwrap(), ["/fixed"]);
        assert!(expand(&t(&["/r/{room}"]), "/ws", "room=*").unwrap_err().contains("'room'"));
        assert!(expand(&t(&["/r/{room}"]), "/ws", "room=").is_err());
        assert!(expand(&t(&["/r/{room}"]), "/ws", "room=%00").is_err());
    }
}
