//! Request bodies and request_info from what a user types: `KEY=VALUE`
//! pairs (key/value encoded, PROTOCOL.md 5), a raw string, or a TOML table;
//! and durations like "30s", "500ms", "2m".

use std::time::Duration;

/// `["value=42", "n=1"]` → `value\0 42\0 n\0 1\0`.
pub fn pairs(items: &[String]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for item in items {
        let (k, v) = item.split_once('=').ok_or_else(|| format!("'{item}' is not KEY=VALUE"))?;
        if k.is_empty() {
            return Err(format!("'{item}': the key is empty"));
        }
        if k.contains('\0') || v.contains('\0') {
            return Err(format!("'{item}': keys and values cannot contain NUL"));
        }
        cumulo_proto::info::push(&mut out, k.as_bytes(), v.as_bytes());
    }
    Ok(out)
}

/// A setting given as a TOML table (key/value encoded, keys in sorted
/// order) or a string (the bytes as they are).
pub fn from_toml(field: &str, v: &toml::Value) -> Result<Vec<u8>, String> {
    match v {
        toml::Value::String(s) => Ok(s.as_bytes().to_vec()),
        toml::Value::Table(t) => {
            let mut out = Vec::new();
            for (k, v) in t {
                let text = match v {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    toml::Value::Float(f) => f.to_string(),
                    toml::Value::Boolean(b) => b.to_string(),
                    _ => return Err(format!("{field}.{k}: values must be strings, numbers or booleans")),
                };
                if k.contains('\0') || text.contains('\0') {
                    return Err(format!("{field}.{k}: keys and values cannot contain NUL"));
                }
                cumulo_proto::info::push(&mut out, k.as_bytes(), text.as_bytes());
            }
            Ok(out)
        }
        _ => Err(format!("{field}: must be a table of key/value pairs or a string")),
    }
}

/// "30s", "500ms", "2m", "1.5s", "10" (seconds).
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("'{s}' is not a duration (e.g. 30s, 500ms, 2m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("'{s}': unknown unit '{unit}' (ms, s, m, h)")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("'{s}' is not a duration (e.g. 30s, 500ms, 2m)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_key_value_encoded() {
        assert_eq!(pairs(&["value=42".into(), "a=".into()]).unwrap(), b"value\x0042\x00a\x00\x00");
        assert!(pairs(&["novalue".into()]).unwrap_err().contains("KEY=VALUE"));
        assert!(pairs(&["=1".into()]).is_err());
    }

    #[test]
    fn toml_tables_and_strings() {
        let t: toml::Table = toml::from_str("r = { value = 42, name = \"x\" }\ns = \"raw\"\nbad = [1]").unwrap();
        assert_eq!(from_toml("r", &t["r"]).unwrap(), b"name\x00x\x00value\x0042\x00");
        assert_eq!(from_toml("s", &t["s"]).unwrap(), b"raw");
        assert!(from_toml("bad", &t["bad"]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(duration("fast").is_err());
        assert!(duration("3 weeks").is_err());
        assert!(duration("-1s").is_err());
    }
}
