//! The `[cluster]` section: which NATS servers, this node's name, the cloud's
//! name and the membership timers. Without it the core is a single node and
//! nothing of this module runs.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Default announce interval, ms: a node learns of a new one within this.
pub const DEFAULT_HEARTBEAT_MS: u32 = 500;
/// Default silence after which a node is purged, ms: six heartbeats, so one
/// or two lost announces never purge a live node.
pub const DEFAULT_PURGE_MS: u32 = 3_000;
/// Default cloud name: the prefix of every subject this cloud uses.
pub const DEFAULT_CLOUD_NAME: &str = "default";
/// Longest node or cloud name, bytes: names travel in every data message's
/// header (one length byte) and in subjects.
pub const MAX_NAME_LEN: usize = 64;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// This node's name; empty: host name, ":" and the admin port.
    pub node: String,
    /// NATS server URLs (`nats://host:port`), one or more.
    pub servers: Vec<String>,
    /// The cloud's name: two clouds may share one NATS.
    pub name: String,
    pub heartbeat_ms: u32,
    pub purge_ms: u32,
    // Passed to the NATS client as they are.
    pub user: Option<String>,
    #[serde(skip_serializing)]
    pub password: Option<String>,
    #[serde(skip_serializing)]
    pub token: Option<String>,
    pub creds_file: Option<PathBuf>,
    pub tls_required: bool,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            node: String::new(),
            servers: Vec::new(),
            name: DEFAULT_CLOUD_NAME.into(),
            heartbeat_ms: DEFAULT_HEARTBEAT_MS,
            purge_ms: DEFAULT_PURGE_MS,
            user: None,
            password: None,
            token: None,
            creds_file: None,
            tls_required: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
        }
    }
}

/// A name usable as one NATS subject token: no dots, wildcards or spaces.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'@' | b'+' | b'='))
}

/// Turns any text (a host name) into a valid name: other characters become '-'.
pub fn sanitize_name(s: &str) -> String {
    let clean: String = s
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':') { c } else { '-' })
        .take(MAX_NAME_LEN)
        .collect();
    if clean.is_empty() {
        "localhost".into()
    } else {
        clean
    }
}

impl ClusterConfig {
    /// The node's name as configured, or the default (host name and admin port).
    pub fn node_name(&self, admin_port: u16) -> String {
        if !self.node.is_empty() {
            return self.node.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "localhost".into());
        let host = host.trim().split('.').next().unwrap_or("localhost").to_string();
        sanitize_name(&format!("{}:{admin_port}", sanitize_name(&host)))
    }

    /// Resolves relative file paths against the config file's folder.
    pub fn resolve_paths(&mut self, base: &std::path::Path) {
        for p in [&mut self.creds_file, &mut self.tls_ca_file, &mut self.tls_cert_file, &mut self.tls_key_file]
            .into_iter()
            .flatten()
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}

/// Whether `s` is a NATS server address as the NATS client takes it: a
/// URL with the scheme `nats`, `tls`, `ws` or `wss` (`nats://` when none is
/// given). Checked here with the URL parser the client uses, so the config
/// does not depend on the client; the core's tests check both agree.
pub fn is_server_address(s: &str) -> bool {
    let with_scheme = if s.contains("://") { s.to_string() } else { format!("nats://{s}") };
    url::Url::parse(&with_scheme).is_ok_and(|u| ["nats", "tls", "ws", "wss"].contains(&u.scheme()))
}

/// Checks the section; errors name the field ("cluster.servers").
pub fn validate(c: &ClusterConfig) -> Result<(), (String, String)> {
    let err = |f: &str, r: String| Err((format!("cluster.{f}"), r));
    if !c.node.is_empty() && !valid_name(&c.node) {
        return err(
            "node",
            format!(
                "'{}': 1 to {MAX_NAME_LEN} of letters, digits and - _ : @ + = (it is a NATS subject token)",
                c.node
            ),
        );
    }
    if !valid_name(&c.name) {
        return err(
            "name",
            format!(
                "'{}': 1 to {MAX_NAME_LEN} of letters, digits and - _ : @ + = (it is a NATS subject token)",
                c.name
            ),
        );
    }
    if c.servers.is_empty() {
        return err("servers", "give one or more NATS servers, e.g. [\"nats://127.0.0.1:4222\"]".into());
    }
    for s in &c.servers {
        if !is_server_address(s) {
            return err("servers", format!("'{s}' is not a NATS server address (nats://host:port)"));
        }
    }
    if c.heartbeat_ms < 10 {
        return err("heartbeat_ms", "must be at least 10 ms".into());
    }
    if c.purge_ms < 2 * c.heartbeat_ms {
        return err("purge_ms", format!("must be at least twice heartbeat_ms ({} ms)", 2 * c.heartbeat_ms));
    }
    if c.password.is_some() && c.user.is_none() {
        return err("password", "give user with password".into());
    }
    if c.user.is_some() && c.token.is_some() {
        return err("token", "give either user/password or token, not both".into());
    }
    if c.tls_cert_file.is_some() != c.tls_key_file.is_some() {
        return err("tls_cert_file", "tls_cert_file and tls_key_file go together".into());
    }
    Ok(())
}
