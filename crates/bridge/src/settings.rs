//! The settings of `internal = "tcp"` and `internal = "udp"`
//! (docs/CONFIG.md, docs/BRIDGES.md), checked at load: a refusal names the
//! bridge and the field, `tcp: port: ...`.

use crate::framing::Framing;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The largest UDP payload over IPv4, in bytes (65,535 less the IP and UDP
/// headers): a datagram cannot be longer.
pub const MAX_DATAGRAM: u64 = 65_507;
/// The largest `max_message` of the tcp bridge, in bytes: a message is
/// held whole in memory before it is sent, and the core's frames are
/// bounded too (`core.max_frame`, 16 MiB by default).
const MAX_TCP_MESSAGE: u64 = 1 << 30;

/// What both bridges have.
#[derive(Debug, Clone)]
pub struct Common {
    pub address: SocketAddr,
    /// The name each message is sent to.
    pub dest: String,
    pub max_message: usize,
    pub timeout_ms: u32,
    pub priority: i8,
    /// Adds `remote_addr` (the peer's `ip:port`) to each request's info.
    pub send_connection_info: bool,
}

impl Common {
    /// Caps `max_message` at the largest request the core carries (set in
    /// the core's config, so known only once running), saying so.
    pub fn cap_max_message(&mut self, bridge: &str, max_request: usize) {
        if self.max_message > max_request {
            tracing::warn!(
                "{bridge}: max_message = {} is over the largest request the core carries ({max_request} bytes, from \
                 core.max_frame): longer messages are refused",
                self.max_message
            );
            self.max_message = max_request;
        }
    }
}

#[derive(Debug, Clone)]
pub struct TcpSettings {
    pub common: Common,
    pub framing: Framing,
    pub max_connections: usize,
    /// Messages of one connection in flight at once (answers stay in order).
    pub pipeline: usize,
    pub idle_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct UdpSettings {
    pub common: Common,
    pub max_in_flight: usize,
}

const COMMON: &[&str] =
    &["address", "port", "allow_remote", "dest", "max_message", "timeout_ms", "priority", "send_connection_info"];
const TCP_ONLY: &[&str] = &["framing", "max_connections", "pipeline", "idle_timeout_ms"];
const UDP_ONLY: &[&str] = &["max_in_flight"];

impl TcpSettings {
    pub fn from_settings(t: &toml::Table) -> Result<TcpSettings, String> {
        let r = Reader { bridge: "tcp", t };
        r.known(TCP_ONLY)?;
        let common = r.common(64 * 1024, MAX_TCP_MESSAGE)?;
        let framing = match r.t.get("framing") {
            None => Framing::Line,
            Some(toml::Value::String(s)) if s == "line" => Framing::Line,
            Some(toml::Value::String(s)) if s == "length" => Framing::Length,
            Some(_) => return Err(r.refuse("framing", "must be \"line\" or \"length\"")),
        };
        Ok(TcpSettings {
            common,
            framing,
            max_connections: r.int("max_connections", 1024, 1, 1_000_000)? as usize,
            pipeline: r.int("pipeline", 16, 1, 1024)? as usize,
            idle_timeout: Duration::from_millis(r.int("idle_timeout_ms", 60_000, 100, 86_400_000)?),
        })
    }
}

impl UdpSettings {
    pub fn from_settings(t: &toml::Table) -> Result<UdpSettings, String> {
        let r = Reader { bridge: "udp", t };
        r.known(UDP_ONLY)?;
        let common = r.common(MAX_DATAGRAM, MAX_DATAGRAM)?;
        Ok(UdpSettings { common, max_in_flight: r.int("max_in_flight", 1024, 1, 1_000_000)? as usize })
    }
}

struct Reader<'a> {
    bridge: &'static str,
    t: &'a toml::Table,
}

impl Reader<'_> {
    fn refuse(&self, field: &str, why: &str) -> String {
        format!("{}: {field}: {why}", self.bridge)
    }

    fn known(&self, own: &[&str]) -> Result<(), String> {
        let known = || COMMON.iter().chain(own).copied().collect::<Vec<_>>();
        match self.t.keys().find(|k| !known().contains(&k.as_str())) {
            Some(k) => Err(self.refuse(k, &format!("unknown setting (known: {})", known().join(", ")))),
            None => Ok(()),
        }
    }

    fn int(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, String> {
        match self.t.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(n)) if (min as i64..=max as i64).contains(n) => Ok(*n as u64),
            Some(_) => Err(self.refuse(key, &format!("must be an integer in {min} ..= {max}"))),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.t.get(key) {
            None => Ok(default),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(_) => Err(self.refuse(key, "must be true or false")),
        }
    }

    fn common(&self, default_max: u64, max_max: u64) -> Result<Common, String> {
        let host = match self.t.get("address") {
            None => "127.0.0.1".to_string(),
            Some(toml::Value::String(s)) => s.clone(),
            Some(_) => return Err(self.refuse("address", "must be a string (an IP address)")),
        };
        let port = match self.t.get("port") {
            Some(toml::Value::Integer(n)) if (1..=65535).contains(n) => *n as u16,
            Some(_) => return Err(self.refuse("port", "must be an integer in 1 ..= 65535")),
            // Every instance binds the same port (SO_REUSEPORT), so it
            // cannot be left to the system to choose.
            None => return Err(self.refuse("port", "is required (the port to listen on)")),
        };
        // An IP address, not a host name: checking a config does no lookup.
        let ip: IpAddr = host.parse().map_err(|_| self.refuse("address", &format!("'{host}' is not an IP address")))?;
        let address = SocketAddr::new(ip, port);
        if !self.bool("allow_remote", false)? && !address.ip().is_loopback() {
            return Err(self.refuse(
                "address",
                &format!("{host} is not a loopback address; set allow_remote = true to accept peers from other hosts"),
            ));
        }
        let dest = match self.t.get("dest") {
            Some(toml::Value::String(s)) if s.starts_with('/') && s.len() > 1 => s.clone(),
            Some(_) => return Err(self.refuse("dest", "must be a service name starting with '/'")),
            None => return Err(self.refuse("dest", "is required (the name each message is sent to)")),
        };
        Ok(Common {
            address,
            dest,
            max_message: self.int("max_message", default_max, 1, max_max)? as usize,
            timeout_ms: self.int("timeout_ms", 5000, 1, 86_400_000)? as u32,
            priority: self.int_signed("priority", 0, -128, 127)? as i8,
            send_connection_info: self.bool("send_connection_info", true)?,
        })
    }

    fn int_signed(&self, key: &str, default: i64, min: i64, max: i64) -> Result<i64, String> {
        match self.t.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(n)) if (min..=max).contains(n) => Ok(*n),
            Some(_) => Err(self.refuse(key, &format!("must be an integer in {min} ..= {max}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(text: &str) -> Result<TcpSettings, String> {
        TcpSettings::from_settings(&text.parse::<toml::Table>().unwrap())
    }

    fn udp(text: &str) -> Result<UdpSettings, String> {
        UdpSettings::from_settings(&text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn defaults_listen_on_loopback() {
        let s = tcp("port = 7000\ndest = \"/echo/x\"").unwrap();
        assert_eq!(s.common.address.to_string(), "127.0.0.1:7000");
        assert_eq!((s.framing, s.common.max_message, s.max_connections), (Framing::Line, 65536, 1024));
        assert_eq!((s.pipeline, s.idle_timeout, s.common.timeout_ms), (16, Duration::from_secs(60), 5000));
        assert!(s.common.send_connection_info);
        let u = udp("port = 7000\ndest = \"/echo/x\"").unwrap();
        assert_eq!((u.common.max_message, u.max_in_flight), (65_507, 1024));
    }

    /// The rows of docs/CONFIG.md's table under `heading`: key, default.
    fn documented(heading: &str) -> Vec<(String, String)> {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONFIG.md")).unwrap();
        let table = doc.split(heading).nth(1).unwrap_or_else(|| panic!("no {heading} in docs/CONFIG.md"));
        let rows = table.lines().skip_while(|l| !l.starts_with('|')).skip(2).take_while(|l| l.starts_with('|'));
        rows.map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (cells[0].trim_start_matches("| ").trim_matches('`').to_string(), cells[1].to_string())
        })
        .collect()
    }

    /// Every setting is in the docs' table, and the default the docs give
    /// is the one the code has: set to it, the settings do not change.
    #[test]
    fn the_docs_give_every_setting_and_its_default() {
        for (heading, own, base) in [
            ("### `tcp` settings", TCP_ONLY, "port = 1\ndest = \"/e\"\n"),
            ("### `udp` settings", UDP_ONLY, "port = 1\ndest = \"/e\"\n"),
        ] {
            let rows = documented(heading);
            let keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
            for k in COMMON.iter().chain(own) {
                assert!(keys.contains(k), "{heading}: `{k}` is not documented");
            }
            let parse = |text: &str| -> Result<String, String> {
                if heading.contains("tcp") {
                    tcp(text).map(|s| format!("{s:?}"))
                } else {
                    udp(text).map(|s| format!("{s:?}"))
                }
            };
            let defaults = parse(base).unwrap();
            for (key, default) in &rows {
                assert!(COMMON.iter().chain(own).any(|k| k == key), "{heading}: `{key}` is no setting");
                if default == "required" {
                    continue;
                }
                // `65536` (64 KiB): the value in backquotes.
                let value = default.split('`').nth(1).unwrap_or_else(|| panic!("{heading}: `{key}`: {default}"));
                let set =
                    parse(&format!("{base}{key} = {value}")).unwrap_or_else(|e| panic!("{heading}: `{key}`: {e}"));
                assert_eq!(set, defaults, "{heading}: `{key}` = {value} is not the default");
            }
        }
    }

    #[test]
    fn refusals_name_the_bridge_and_the_field() {
        let cases = [
            ("dest = \"/e\"", "tcp: port: is required"),
            ("port = 0\ndest = \"/e\"", "tcp: port: must be"),
            ("port = 1", "tcp: dest: is required"),
            ("port = 1\ndest = \"e\"", "tcp: dest: must be"),
            ("port = 1\ndest = \"/e\"\nframing = \"csv\"", "tcp: framing: must be"),
            ("port = 1\ndest = \"/e\"\nmax_message = 0", "tcp: max_message: must be"),
            ("port = 1\ndest = \"/e\"\naddress = \"0.0.0.0\"", "tcp: address: 0.0.0.0 is not a loopback"),
            ("port = 1\ndest = \"/e\"\naddress = \"no such host\"", "tcp: address: 'no such host'"),
            ("port = 1\ndest = \"/e\"\ncolour = 1", "tcp: colour: unknown setting"),
            ("port = 1\ndest = \"/e\"\nmax_in_flight = 1", "tcp: max_in_flight: unknown setting"),
            ("port = 1\ndest = \"/e\"\nidle_timeout_ms = 5", "tcp: idle_timeout_ms: must be"),
        ];
        for (text, want) in cases {
            let e = tcp(text).unwrap_err();
            assert!(e.starts_with(want), "{text}: {e}");
        }
        let e = udp("port = 1\ndest = \"/e\"\nmax_message = 65508").unwrap_err();
        assert!(e.starts_with("udp: max_message: must be an integer in 1 ..= 65507"), "{e}");
        let e = udp("port = 1\ndest = \"/e\"\nframing = \"line\"").unwrap_err();
        assert!(e.starts_with("udp: framing: unknown setting"), "{e}");
        assert!(tcp("port = 1\ndest = \"/e\"\naddress = \"0.0.0.0\"\nallow_remote = true").is_ok());
    }
}
