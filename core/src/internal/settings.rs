//! Which internal services exist and the checks of their settings, run
//! without creating a service (no socket bound, nothing started): what a
//! config file and the admin API are checked against.
//!
//! A leaf of the core's layering (docs/ARCHITECTURE.md): it and the settings
//! modules it calls know no `InternalApi` and no core state. The config
//! crate, below every service, is handed these checks as [`CATALOGUE`].

/// The catalogue as the config checks a file or an admin API call with.
pub const CATALOGUE: cumulo_config::Catalogue =
    cumulo_config::Catalogue { known: KNOWN, check: check_settings, needs_cluster, file_settings };

/// Names accepted in `internal = "..."`.
pub const KNOWN: &[&str] = &[
    "chaos",
    "cron",
    "echo",
    "filesystem",
    "health_check",
    "http",
    "http_client",
    "queue",
    "request_rate",
    "tcp",
    "udp",
];

/// Checks the settings of the internal service `name`.
pub fn check_settings(name: &str, settings: &toml::Table) -> Result<(), String> {
    match name {
        "chaos" => cumulo_chaos::Settings::from_settings(settings).map(drop),
        "cron" => cumulo_cron::check_settings(settings),
        "echo" => echo_pattern(settings).map(drop),
        "filesystem" => cumulo_filesystem::check_settings(settings),
        "health_check" => cumulo_health_check::check_settings(settings),
        "http" => cumulo_gateway::check_settings(settings),
        "http_client" => cumulo_http_client::check_settings(settings),
        "request_rate" => cumulo_loadgen::check_request_rate_settings(settings),
        "queue" => cumulo_queue::check_settings(settings),
        "tcp" => cumulo_bridge::check_tcp_settings(settings),
        "udp" => cumulo_bridge::check_udp_settings(settings),
        other => Err(format!("unknown internal service '{other}' (known: {})", KNOWN.join(", "))),
    }
}

/// A queue on JetStream keeps its requests on the cloud's NATS.
fn needs_cluster(name: &str, settings: &toml::Table) -> Option<&'static str> {
    (name == "queue" && is_jetstream_queue(settings)).then_some(
        "is a queue with backend = \"jetstream\", a stream on the cloud's NATS: add a [cluster] section with \
         servers (or use backend = \"file\")",
    )
}

/// Settings that are file paths, relative to the config file's folder.
/// (The gateway's `access_log` stays relative to the core's working
/// directory, as docs/GATEWAY.md has always said.)
fn file_settings(name: &str) -> &'static [&'static str] {
    match name {
        "http" => &["tls_cert", "tls_key"],
        _ => &[],
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

#[cfg(test)]
mod tests {
    use super::CATALOGUE;
    use cumulo_config::Config;

    fn parse(text: &str) -> Result<Config, cumulo_config::ConfigError> {
        Config::parse(text, "test.toml", "/etc/cumulo".into(), &CATALOGUE)
    }

    #[test]
    fn the_config_checks_each_internal_service_with_its_own_settings_check() {
        let cases = [
            (
                "internal = \"nosuch\"",
                "service[0] (/s/).internal",
                "unknown internal service 'nosuch' (known: chaos, cron, echo,",
            ),
            ("internal = \"echo\"\nsettings = { colour = 1 }", "service[0] (/s/).settings", "echo: unknown setting"),
            (
                "internal = \"chaos\"\nsettings = { fail = 2 }",
                "service[0] (/s/).settings",
                "chaos: fail: must be a share",
            ),
            ("internal = \"http\"\nsettings = { port = \"x\" }", "service[0] (/s/).settings", "port"),
            (
                "internal = \"queue\"\nsettings = { dir = \"q\", sync = \"sometimes\" }",
                "service[0] (/s/).settings",
                "sync",
            ),
            ("internal = \"request_rate\"\nsettings = { rate = -1 }", "service[0] (/s/).settings", "rate"),
            ("internal = \"tcp\"\nsettings = { dest = \"/e\" }", "service[0] (/s/).settings", "tcp: port: is required"),
            ("internal = \"udp\"\nsettings = { port = 9 }", "service[0] (/s/).settings", "udp: dest: is required"),
            (
                "internal = \"http_client\"\nsettings = { max_connections = 0 }",
                "service[0] (/s/).settings",
                "http_client: max_connections: must be an integer",
            ),
            (
                "internal = \"cron\"\n[[service.settings.job]]\nname = \"n\"\nschedule = \"0 3 32 * *\"\ndest = \"/r\"",
                "service[0] (/s/).settings",
                "cron: job[0] (n).schedule: day-of-month: 32 is out of range 1-31",
            ),
            ("internal = \"queue\"\nsettings = { backend = \"jetstream\" }", "cluster.servers", "add a [cluster]"),
        ];
        for (service, field, reason) in cases {
            let e = parse(&format!("[[service]]\nprefix = \"/s/\"\n{service}")).unwrap_err();
            assert_eq!(e.field, field, "{service}: {e}");
            assert!(e.reason.contains(reason), "{service}: {e}");
        }
        let ok = "[[service]]\nprefix = \"/s/\"\ninternal = \"echo\"\nsettings = { pattern = \"x/*\" }";
        assert!(parse(ok).is_ok());
    }
}
