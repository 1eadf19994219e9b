//! The settings of a chaos service (`[service.settings]`), checked at load.

/// Longest `delay_ms`: a delay is a timer per request in flight, and a
/// longer one is what `drop` is for.
pub const MAX_DELAY_MS: u32 = 600_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The pattern it subscribes under its prefix (default `*`).
    pub pattern: String,
    /// Shares of requests (0 .. 1, adding up to at most 1).
    pub fail: f64,
    pub drop: f64,
    pub exit: f64,
    pub delay: f64,
    /// How long a delayed request waits, ms.
    pub delay_ms: u32,
    /// Seeds the draws: the same requests meet the same fates.
    pub seed: Option<u64>,
}

impl Settings {
    pub fn from_settings(t: &toml::Table) -> Result<Settings, String> {
        const KNOWN: &[&str] = &["pattern", "fail", "drop", "exit", "delay", "delay_ms", "seed"];
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("chaos: {k}: unknown setting (known: {})", KNOWN.join(", ")));
        }
        let share = |key: &str| -> Result<f64, String> {
            match t.get(key) {
                None => Ok(0.0),
                Some(v) => {
                    let x = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
                    match x {
                        Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
                        _ => Err(format!("chaos: {key}: must be a share of requests, 0 .. 1")),
                    }
                }
            }
        };
        let pattern = match t.get("pattern") {
            None => "*".to_string(),
            Some(toml::Value::String(p)) if !p.is_empty() => p.clone(),
            Some(_) => return Err("chaos: pattern: must be a non-empty string".into()),
        };
        let delay_ms = match t.get("delay_ms") {
            None => 0,
            Some(toml::Value::Integer(ms)) if (0..=MAX_DELAY_MS as i64).contains(ms) => *ms as u32,
            Some(_) => return Err(format!("chaos: delay_ms: must be 0 .. {MAX_DELAY_MS}")),
        };
        let seed = match t.get("seed") {
            None => None,
            Some(toml::Value::Integer(s)) if *s >= 0 => Some(*s as u64),
            Some(_) => return Err("chaos: seed: must be a non-negative integer".into()),
        };
        let s = Settings {
            pattern,
            fail: share("fail")?,
            drop: share("drop")?,
            exit: share("exit")?,
            delay: share("delay")?,
            delay_ms,
            seed,
        };
        if s.fail + s.drop + s.exit + s.delay > 1.0 + 1e-9 {
            return Err("chaos: fail + drop + exit + delay: the shares add up to more than 1".into());
        }
        if s.delay > 0.0 && s.delay_ms == 0 {
            return Err("chaos: delay_ms: needed with delay".into());
        }
        Ok(s)
    }
}
