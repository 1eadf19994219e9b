//! `[[service.settings.websocket]]`: the URL path prefixes where the gateway
//! accepts a WebSocket upgrade, each with its names and limits. Every key is
//! documented in docs/GATEWAY.md (WebSocket); an unknown key or a value of
//! the wrong type is refused with the key and what it accepts.

/// Default largest message in either direction, bytes (1 MiB, the gateway's
/// `max_body`): a browser's chat line or JSON call is a few KiB.
pub const DEFAULT_MAX_MESSAGE: usize = 1024 * 1024;
/// Default largest single frame, bytes: a message may come in several.
pub const DEFAULT_MAX_FRAME: usize = 1024 * 1024;
/// Default connections open at once on one path prefix.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default bytes waiting to be written to one browser (pushes and answers it
/// has not read yet): past it the reader is too slow and is cut off.
pub const DEFAULT_MAX_PENDING: usize = 1024 * 1024;
/// Default requests in flight from one connection at once (protocol `"id"`;
/// without a protocol it is always 1, so that answers keep the order of the
/// messages).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;
/// Default time without any frame from the client (pongs count) before the
/// connection is closed, ms. The gateway pings every `ping_ms`, so a live
/// browser that says nothing still answers.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 60_000;
/// Default interval of the gateway's pings, ms.
pub const DEFAULT_PING_MS: u64 = 20_000;

/// How messages in map to requests and answers back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A message is a request; its answer (if not empty) is the next message
    /// back. One request at a time, answers in order.
    None,
    /// A text message is a JSON object with an `"id"`; requests run
    /// concurrently and each answer comes back as
    /// `{"id": ..., "status": "OK", "response": ...}`.
    Id,
}

#[derive(Debug, Clone)]
pub struct PathSettings {
    /// URL path prefix where an upgrade is accepted.
    pub path: String,
    /// Appended to the URL path (with the gateway's `name_prefix` before it)
    /// to make the connection's own name.
    pub name_suffix: String,
    /// One connection per name: a new one closes the older.
    pub unique: bool,
    /// Where messages in go; `None`: the service name of the upgrade's GET
    /// (`/chat/room/get`).
    pub request_name: Option<String>,
    pub protocol: Protocol,
    /// Sent with send_sync when a connection opens; a non-empty answer is
    /// the first message to the browser.
    pub connect_name: Option<String>,
    /// Sent when a connection ends, with the reason.
    pub disconnect_name: Option<String>,
    /// Extra names a connection subscribes: templates with `{query-key}`
    /// and `{path}` (see `url::expand`).
    pub subscriptions: Vec<String>,
    pub max_message: usize,
    pub max_frame: usize,
    pub max_connections: usize,
    pub max_pending: usize,
    pub max_in_flight: usize,
    pub idle_timeout_ms: u64,
    pub ping_ms: u64,
    pub timeout_ms: u32,
    /// The pages whose browsers may open a connection (origin.rs).
    pub origins: super::origin::Origins,
}

const KNOWN: &[&str] = &[
    "path",
    "name_suffix",
    "unique",
    "request_name",
    "protocol",
    "connect_name",
    "disconnect_name",
    "subscriptions",
    "max_message",
    "max_frame",
    "max_connections",
    "max_pending",
    "max_in_flight",
    "idle_timeout_ms",
    "ping_ms",
    "timeout_ms",
    "origins",
];

/// Reads `settings.websocket` (absent: no WebSocket anywhere). `timeout_ms`
/// defaults to the gateway's own.
pub fn from_settings(table: &toml::Table, gateway_timeout_ms: u32) -> Result<Vec<PathSettings>, String> {
    let entries = match table.get("websocket") {
        None => return Ok(Vec::new()),
        Some(toml::Value::Array(a)) => a,
        Some(toml::Value::Table(t)) => return Ok(vec![one(t, gateway_timeout_ms, 0)?]),
        Some(v) => {
            return Err(format!("http: settings.websocket must be a table or a list of tables, not {}", v.type_str()))
        }
    };
    let mut out: Vec<PathSettings> = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let toml::Value::Table(t) = e else {
            return Err(format!("http: settings.websocket[{i}] must be a table"));
        };
        let s = one(t, gateway_timeout_ms, i)?;
        if out.iter().any(|o| o.path == s.path) {
            return Err(format!("http: settings.websocket[{i}].path '{}' is configured twice", s.path));
        }
        out.push(s);
    }
    // Longest prefix first, so that the most specific path wins.
    out.sort_by_key(|p| std::cmp::Reverse(p.path.len()));
    Ok(out)
}

fn one(t: &toml::Table, gateway_timeout_ms: u32, i: usize) -> Result<PathSettings, String> {
    let at = |key: &str| format!("http: settings.websocket[{i}].{key}");
    if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(format!("http: unknown setting websocket[{i}].{k} (known: {})", KNOWN.join(", ")));
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) if s.contains('\0') => Err(format!("{} must not contain a NUL", at(key))),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("{} must be a string, not {}", at(key), v.type_str())),
        }
    };
    let int = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, String> {
        match t.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(n)) if (min as i64..=max as i64).contains(n) => Ok(*n as u64),
            Some(toml::Value::Integer(n)) => Err(format!("{} = {n} is out of range ({min} .. {max})", at(key))),
            Some(v) => Err(format!("{} must be an integer, not {}", at(key), v.type_str())),
        }
    };
    let path =
        text("path")?.ok_or_else(|| format!("{} is required (the URL path prefix, e.g. \"/chat/\")", at("path")))?;
    if !path.starts_with('/') || path.contains(['*', '?']) {
        return Err(format!("{} '{path}' must start with '/' and hold no '*' or '?'", at("path")));
    }
    let protocol = match text("protocol")?.as_deref() {
        None | Some("none") => Protocol::None,
        Some("id") => Protocol::Id,
        Some(other) => return Err(format!("{} '{other}' must be \"none\" or \"id\"", at("protocol"))),
    };
    let unique = match t.get("unique") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(v) => return Err(format!("{} must be true or false, not {}", at("unique"), v.type_str())),
    };
    let subscriptions = match t.get("subscriptions") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                toml::Value::String(s) if s.starts_with('/') && !s.contains(['*', '?', '\0']) => Ok(s.clone()),
                _ => Err(format!("{} must be a list of names starting with '/' (no '*' or '?')", at("subscriptions"))),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => return Err(format!("{} must be a list of strings, not {}", at("subscriptions"), v.type_str())),
    };
    let name_suffix = text("name_suffix")?.unwrap_or_else(|| "/websocket".into());
    if name_suffix.contains(['*', '?']) {
        return Err(format!("{} must hold no '*' or '?'", at("name_suffix")));
    }
    let origins = match t.get("origins") {
        None => super::origin::Origins::SameHost,
        Some(toml::Value::Array(a)) => {
            let list = a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{} must be a list of strings", at("origins")))?;
            super::origin::Origins::from_list(&list).map_err(|why| format!("{}: {why}", at("origins")))?
        }
        Some(v) => return Err(format!("{} must be a list of origins, not {}", at("origins"), v.type_str())),
    };
    let max_message = int("max_message", DEFAULT_MAX_MESSAGE as u64, 16, 1 << 30)? as usize;
    Ok(PathSettings {
        path,
        name_suffix,
        unique,
        request_name: text("request_name")?,
        protocol,
        connect_name: text("connect_name")?,
        disconnect_name: text("disconnect_name")?,
        subscriptions,
        max_message,
        max_frame: int("max_frame", DEFAULT_MAX_FRAME as u64, 16, 1 << 30)? as usize,
        max_connections: int("max_connections", DEFAULT_MAX_CONNECTIONS as u64, 1, 1_000_000)? as usize,
        max_pending: int("max_pending", DEFAULT_MAX_PENDING.max(max_message) as u64, 1024, 1 << 30)? as usize,
        max_in_flight: int("max_in_flight", DEFAULT_MAX_IN_FLIGHT as u64, 1, 10_000)? as usize,
        idle_timeout_ms: int("idle_timeout_ms", DEFAULT_IDLE_TIMEOUT_MS, 100, 86_400_000)?,
        ping_ms: int("ping_ms", DEFAULT_PING_MS, 0, 86_400_000)?,
        timeout_ms: int("timeout_ms", gateway_timeout_ms as u64, 1, u32::MAX as u64)? as u32,
        origins,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<PathSettings>, String> {
        from_settings(&text.parse::<toml::Table>().unwrap(), 5000)
    }

    #[test]
    fn absent_means_off_and_defaults_are_on() {
        assert!(parse("port = 1").unwrap().is_empty());
        let s = &parse("[[websocket]]\npath = \"/chat/\"").unwrap()[0];
        assert_eq!((s.max_message, s.max_frame, s.max_connections), (1 << 20, 1 << 20, 10_000));
        assert_eq!((s.idle_timeout_ms, s.ping_ms, s.timeout_ms, s.max_in_flight), (60_000, 20_000, 5000, 16));
        assert_eq!((s.name_suffix.as_str(), s.unique, s.protocol), ("/websocket", false, Protocol::None));
        assert_eq!(s.origins, super::super::origin::Origins::SameHost);
    }

    #[test]
    fn longest_path_first() {
        let s = parse("[[websocket]]\npath = \"/a/\"\n[[websocket]]\npath = \"/a/b/\"\nprotocol = \"id\"").unwrap();
        assert_eq!(s[0].path, "/a/b/");
        assert_eq!(s[0].protocol, Protocol::Id);
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        let bad = [
            ("[[websocket]]\nunique = true", "path is required"),
            ("[[websocket]]\npath = \"chat\"", "must start with '/'"),
            ("[[websocket]]\npath = \"/a/*\"", "no '*'"),
            ("[[websocket]]\npath = \"/a/\"\nprotocol = \"json\"", "protocol"),
            ("[[websocket]]\npath = \"/a/\"\nmax_frame = 1", "max_frame = 1 is out of range"),
            ("[[websocket]]\npath = \"/a/\"\nmax_conections = 1", "unknown setting websocket[0].max_conections"),
            ("[[websocket]]\npath = \"/a/\"\nsubscriptions = [\"/r/*\"]", "subscriptions"),
            ("[[websocket]]\npath = \"/a/\"\n[[websocket]]\npath = \"/a/\"", "twice"),
            ("websocket = 3", "table or a list"),
            ("[[websocket]]\npath = \"/a/\"\norigins = \"*\"", "origins must be a list"),
            ("[[websocket]]\npath = \"/a/\"\norigins = [\"app.example\"]", "is not an origin"),
        ];
        for (text, want) in bad {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
