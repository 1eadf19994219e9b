//! Who may connect and who may send to what: `[[client]]` tables, the
//! `[acl]` groups and the rules for instances that present no token
//! (docs/SECURITY.md).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Most entries one `dest_list_allow` / `dest_list_deny` may hold once its
/// groups are expanded: each entry is a pattern a send's name may be
/// matched against on a cache miss.
pub const MAX_ACL_PATTERNS: usize = 1024;
/// Most `[[client]]` tables: a HELLO's token is compared with each.
pub const MAX_CLIENTS: usize = 1024;
/// How deep one `[acl]` group may name another.
const MAX_GROUP_DEPTH: usize = 8;

/// What an instance that presents no token (an unmanaged tool, a test, a
/// load generator) may do on one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Anonymous {
    /// Refused with UNAUTHORIZED at HELLO.
    Refuse,
    /// Admitted, but may subscribe no pattern that could match a name
    /// under a configured service's prefix.
    OutsideServices,
    /// Admitted with any prefix.
    Any,
}

/// One `[[client]]`: an unmanaged program the operator names, admitted on
/// either listener by its token.
#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Names it in logs and metrics.
    pub name: String,
    /// The token its HELLO presents (or `token_file`).
    #[serde(skip_serializing)]
    pub token: Option<String>,
    /// A file holding the token (relative to the config file's folder);
    /// read at load, refused if other users may read it.
    pub token_file: Option<String>,
    /// The prefixes its HELLO may claim (the prefix must start with one).
    pub prefixes: Vec<String>,
    /// The names it may send to (patterns or `[acl]` groups); none: any.
    pub dest_list_allow: Option<Vec<String>>,
    /// The names it may not send to (patterns or `[acl]` groups).
    pub dest_list_deny: Vec<String>,
}

impl ClientConfig {
    /// The token, from the table or its file (resolved by `Config::parse`).
    pub fn secret(&self) -> &str {
        self.token.as_deref().unwrap_or("")
    }
}

/// `[acl]`: named groups of patterns, usable in any `dest_list_allow` /
/// `dest_list_deny` (as CloudI's `acl` option).
pub type AclGroups = BTreeMap<String, Vec<String>>;

/// Checks one list entry: a pattern (starts with '/') or a group name.
fn check_entry(entry: &str, groups: &AclGroups) -> Result<(), String> {
    if entry.starts_with('/') {
        return cumulo_pattern::validate(entry).map_err(|why| format!("'{entry}': {why}"));
    }
    if groups.contains_key(entry) {
        return Ok(());
    }
    let known: Vec<&str> = groups.keys().map(String::as_str).collect();
    Err(format!(
        "'{entry}' is neither a pattern (starting with '/') nor a group of [acl] (known: {})",
        if known.is_empty() { "none".to_string() } else { known.join(", ") }
    ))
}

/// Checks every group of `[acl]`: entries valid, no cycle, bounded depth.
pub fn check_groups(groups: &AclGroups) -> Result<(), (String, String)> {
    for (name, entries) in groups {
        let at = format!("acl.{name}");
        if name.starts_with('/') || name.is_empty() {
            return Err((at, "a group's name must not be empty nor start with '/'".into()));
        }
        for e in entries {
            check_entry(e, groups).map_err(|why| (at.clone(), why))?;
        }
        expand(std::slice::from_ref(name), groups).map_err(|why| (at, why))?;
    }
    Ok(())
}

/// Checks a list and returns it with every group replaced by its patterns
/// (in order, duplicates dropped).
pub fn expand(list: &[String], groups: &AclGroups) -> Result<Vec<String>, String> {
    /// Each group is walked once per list (`done`): what it adds is
    /// already in `out`, so the work is linear in the groups, whatever
    /// they name; `path` holds the groups being walked, to name a cycle.
    struct Walk<'a> {
        groups: &'a AclGroups,
        out: Vec<String>,
        done: std::collections::BTreeSet<&'a str>,
        path: Vec<&'a str>,
    }
    impl<'a> Walk<'a> {
        fn entry(&mut self, e: &'a str) -> Result<(), String> {
            if e.starts_with('/') {
                if !self.out.iter().any(|p| p == e) {
                    self.out.push(e.to_string());
                }
                return Ok(());
            }
            if self.path.contains(&e) {
                return Err(format!("group '{e}' names itself (through {})", self.path.join(" -> ")));
            }
            if self.path.len() >= MAX_GROUP_DEPTH {
                return Err(format!("group '{e}' is nested more than {MAX_GROUP_DEPTH} deep"));
            }
            if !self.done.insert(e) {
                return Ok(());
            }
            let Some(inner) = self.groups.get(e) else { return Ok(()) };
            self.path.push(e);
            for i in inner {
                check_entry(i, self.groups).map_err(|why| format!("in group '{e}': {why}"))?;
                self.entry(i)?;
            }
            self.path.pop();
            Ok(())
        }
    }
    let mut walk = Walk { groups, out: Vec::new(), done: Default::default(), path: Vec::new() };
    for e in list {
        check_entry(e, groups)?;
        walk.entry(e)?;
        if walk.out.len() > MAX_ACL_PATTERNS {
            return Err(format!("more than {MAX_ACL_PATTERNS} patterns once groups are expanded"));
        }
    }
    Ok(walk.out)
}

/// A token: printable ASCII without spaces, 16 bytes or more.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.len() < 16 {
        return Err("a token must be at least 16 bytes (guessable otherwise)".into());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("a token must be printable ASCII without spaces".into());
    }
    Ok(())
}

/// Checks the clients, reads their token files (relative to `base`),
/// expands their lists' groups.
pub fn resolve_clients(clients: &mut [ClientConfig], groups: &AclGroups, base: &Path) -> Result<(), (String, String)> {
    if clients.len() > MAX_CLIENTS {
        return Err(("client".into(), format!("{} clients; at most {MAX_CLIENTS}", clients.len())));
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in clients.iter_mut().enumerate() {
        let at = |f: &str| format!("client[{i}] ({}).{f}", c.name);
        if c.name.is_empty() || !c.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
            return Err((at("name"), "must be letters, digits, '-', '_' or '.'".into()));
        }
        if !names.insert(c.name.clone()) {
            return Err((at("name"), "two clients have this name".into()));
        }
        c.token = match (&c.token, &c.token_file) {
            (Some(_), Some(_)) => return Err((at("token"), "give token or token_file, not both".into())),
            (None, None) => return Err((at("token"), "give token or token_file".into())),
            (Some(t), None) => {
                check_token(t).map_err(|why| (at("token"), why))?;
                Some(t.clone())
            }
            (None, Some(f)) => {
                let t = crate::admin::read_token_file(&base.join(f)).map_err(|why| (at("token_file"), why))?;
                check_token(&t).map_err(|why| (at("token_file"), why))?;
                Some(t)
            }
        };
        if c.prefixes.is_empty() {
            return Err((at("prefixes"), "name at least one prefix its HELLO may claim".into()));
        }
        for p in &c.prefixes {
            if !p.starts_with('/') || !p.ends_with('/') {
                return Err((at("prefixes"), format!("'{p}' must start and end with '/'")));
            }
            cumulo_pattern::validate(p).map_err(|why| (at("prefixes"), why))?;
        }
        if let Some(allow) = &c.dest_list_allow {
            c.dest_list_allow = Some(expand(allow, groups).map_err(|why| (at("dest_list_allow"), why))?);
        }
        c.dest_list_deny = expand(&c.dest_list_deny, groups).map_err(|why| (at("dest_list_deny"), why))?;
    }
    let tokens: Vec<&str> = clients.iter().map(ClientConfig::secret).collect();
    for (i, t) in tokens.iter().enumerate() {
        if tokens[..i].contains(t) {
            return Err((format!("client[{i}].token"), "two clients have the same token".into()));
        }
    }
    Ok(())
}
