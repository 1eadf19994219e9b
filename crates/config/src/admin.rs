//! The `[admin]` section: where the admin API listens, and the tokens that
//! may call it, each with a role. A token is written in the file or read
//! from a file of its own (`token_file`), which must be private to its owner
//! as an SSH key must.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Default port of the admin API (HTTP/JSON), next to the instances' 7310.
pub const DEFAULT_ADMIN_PORT: u16 = 7311;
/// Longest token name: it shows in logs and in `GET /v1/whoami`.
pub const MAX_TOKEN_NAME: usize = 64;
/// Name of the token that `token` / `token_file` at the top of `[admin]` give.
pub const TOP_TOKEN_NAME: &str = "admin";

/// What a token may do with the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads: status, lists, metrics, the dashboard without its buttons.
    Read,
    /// Every call, changes included.
    Operate,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Operate => "operate",
        }
    }
}

/// One token that may call the admin API.
#[derive(Debug, Clone)]
pub struct AdminToken {
    /// Said in logs and by `GET /v1/whoami`; never the secret.
    pub name: String,
    pub role: Role,
    /// The token itself: as written (`token`), or read from `token_file`
    /// when the config is loaded ([`AdminConfig::read_token_files`]).
    pub secret: String,
    /// Where the secret comes from, when not written in the config.
    pub token_file: Option<PathBuf>,
    /// Where it is written, for errors: `admin` or `admin.tokens[1]`.
    pub at: String,
}

/// The admin API: HTTP/JSON on `address:port` (port 0: no admin API).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(from = "AdminTable")]
pub struct AdminConfig {
    /// An IP address; loopback by default so only local users can reach it.
    pub address: String,
    pub port: u16,
    /// Whether `port` was set in the file rather than left at its default:
    /// a port the operator asked for that is in use stops the start; the
    /// default one in use only turns the admin API off, with a warning
    /// (`admin::bind`).
    #[serde(skip)]
    pub port_set: bool,
    /// Tokens that may call it; with any, every call needs one. Required
    /// off loopback.
    #[serde(skip)]
    pub tokens: Vec<AdminToken>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig { address: "127.0.0.1".into(), port: DEFAULT_ADMIN_PORT, port_set: false, tokens: Vec::new() }
    }
}

/// The `[admin]` table as written: what it leaves out takes the default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdminTable {
    address: Option<String>,
    port: Option<u16>,
    /// An operate token: the shape before roles, still accepted.
    token: Option<String>,
    token_file: Option<PathBuf>,
    #[serde(default)]
    tokens: Vec<TokenTable>,
}

/// One `[[admin.tokens]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenTable {
    name: String,
    role: Role,
    token: Option<String>,
    token_file: Option<PathBuf>,
}

impl From<AdminTable> for AdminConfig {
    fn from(t: AdminTable) -> AdminConfig {
        let d = AdminConfig::default();
        let mut tokens = Vec::new();
        if t.token.is_some() || t.token_file.is_some() {
            tokens.push(AdminToken {
                name: TOP_TOKEN_NAME.into(),
                role: Role::Operate,
                secret: t.token.unwrap_or_default(),
                token_file: t.token_file,
                at: "admin".into(),
            });
        }
        for (i, x) in t.tokens.into_iter().enumerate() {
            tokens.push(AdminToken {
                name: x.name,
                role: x.role,
                secret: x.token.unwrap_or_default(),
                token_file: x.token_file,
                at: format!("admin.tokens[{i}]"),
            });
        }
        AdminConfig {
            address: t.address.unwrap_or(d.address),
            port: t.port.unwrap_or(d.port),
            port_set: t.port.is_some(),
            tokens,
        }
    }
}

impl AdminConfig {
    pub fn enabled(&self) -> bool {
        self.port != 0
    }

    /// The socket address to listen on (valid once the config was validated).
    pub fn socket_addr(&self) -> std::net::SocketAddr {
        let ip: std::net::IpAddr = self.address.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into());
        std::net::SocketAddr::new(ip, self.port)
    }

    /// The token a client reading this config (`cumulo ... --config`)
    /// presents: one that may make every call, else a read one.
    pub fn client_token(&self) -> Option<&str> {
        let operate = self.tokens.iter().find(|t| t.role == Role::Operate);
        operate.or(self.tokens.first()).map(|t| t.secret.as_str())
    }

    /// Reads every `token_file` (relative to `base`, the config's folder)
    /// into its token's secret. Errors are (field, reason).
    pub fn read_token_files(&mut self, base: &Path) -> Result<(), (String, String)> {
        for t in &mut self.tokens {
            let Some(file) = &mut t.token_file else { continue };
            if !t.secret.is_empty() {
                return Err((format!("{}.token", t.at), "give token or token_file, not both".into()));
            }
            if file.is_relative() {
                *file = base.join(&*file);
            }
            t.secret = read_token_file(file).map_err(|why| (format!("{}.token_file", t.at), why))?;
        }
        Ok(())
    }
}

/// Largest token file read, bytes.
const MAX_TOKEN_FILE: u64 = 4096;

/// Reads a token from its own file: the first line's bytes without the
/// line end. Refused when missing, empty, or open to other users (group or
/// others may read or write it: mode & 0o077), as ssh refuses such a key:
/// a secret anyone on the machine can read is no secret.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "the token file {shown} is open to other users (mode {mode:03o}): only its owner may read it; \
             run chmod 600 {shown}"
        ));
    }
    if meta.len() > MAX_TOKEN_FILE {
        return Err(format!("the token file {shown} is {} bytes: a token file holds one token", meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    let token = text.trim_end_matches(['\n', '\r']);
    if token.is_empty() {
        return Err(format!("the token file {shown} is empty"));
    }
    Ok(token.to_string())
}

/// Checks the section once its token files are read.
pub(crate) fn validate(a: &AdminConfig) -> Result<(), (String, String)> {
    let err = |f: &str, r: String| Err((f.to_string(), r));
    let ip: std::net::IpAddr = match a.address.parse() {
        Ok(ip) => ip,
        Err(_) => return err("admin.address", format!("'{}' is not an IP address (e.g. 127.0.0.1 or ::1)", a.address)),
    };
    for (i, t) in a.tokens.iter().enumerate() {
        let token = format!("{}.token", t.at);
        if t.secret.is_empty() {
            let why = if t.at == "admin" {
                "must not be empty (leave it out for no token)"
            } else {
                "give token or token_file"
            };
            return err(&token, why.into());
        }
        if !t.secret.bytes().all(|b| b.is_ascii_graphic()) {
            return err(&token, "must be printable ASCII without spaces (it travels in an HTTP header)".into());
        }
        if t.name.is_empty() || t.name.len() > MAX_TOKEN_NAME || !t.name.bytes().all(|b| b.is_ascii_graphic()) {
            return err(
                &format!("{}.name", t.at),
                format!("must be 1 .. {MAX_TOKEN_NAME} printable ASCII characters without spaces"),
            );
        }
        if let Some(other) = a.tokens[..i].iter().find(|o| o.name == t.name) {
            return err(&format!("{}.name", t.at), format!("'{}' is also the name of {}", t.name, other.at));
        }
        if let Some(other) = a.tokens[..i].iter().find(|o| o.secret == t.secret) {
            return err(&token, format!("the same token as {}: each token must be different", other.at));
        }
    }
    if a.tokens.is_empty() && a.enabled() && !ip.is_loopback() {
        return err(
            "admin.token",
            format!(
                "required when admin.address ({}) is not a loopback address: anyone who can reach it could run programs",
                a.address
            ),
        );
    }
    Ok(())
}
