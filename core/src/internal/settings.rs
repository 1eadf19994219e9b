//! Which internal services exist and the checks of their settings, run
//! without creating a service (no socket bound, nothing started): what a
//! config file and the admin API are checked against.
//!
//! A leaf of the core's layering (docs/ARCHITECTURE.md): it and the settings
//! modules it calls know no `InternalApi` and no core state, so `config`
//! can check a file without depending on the layers above it.

/// Names accepted in `internal = "..."`.
pub const KNOWN: &[&str] = &["echo", "filesystem", "http", "queue", "request_rate"];

pub fn is_known(name: &str) -> bool {
    KNOWN.contains(&name)
}

/// Checks the settings of the internal service `name`.
pub fn check_settings(name: &str, settings: &toml::Table) -> Result<(), String> {
    match name {
        "echo" => echo_pattern(settings).map(drop),
        "filesystem" => super::filesystem::settings::Settings::from_settings(settings).map(drop),
        "http" => super::http::settings::check(settings),
        "request_rate" => cumulo_loadgen::check_request_rate_settings(settings),
        "queue" => cumulo_queue::check_settings(settings),
        other => Err(format!("unknown internal service '{other}' (known: {})", KNOWN.join(", "))),
    }
}

/// Whether a queue's settings choose the JetStream backend.
pub fn is_jetstream_queue(settings: &toml::Table) -> bool {
    settings.get("backend").and_then(|v| v.as_str()) == Some("jetstream")
}

/// `echo`'s one setting: the pattern it subscribes (default `"*"`).
pub fn echo_pattern(settings: &toml::Table) -> Result<String, String> {
    let pattern = match settings.get("pattern") {
        None => "*".to_string(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err("echo: settings.pattern must be a string".into()),
    };
    if let Some(k) = settings.keys().find(|k| *k != "pattern") {
        return Err(format!("echo: unknown setting '{k}' (known: pattern)"));
    }
    Ok(pattern)
}
