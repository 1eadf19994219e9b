//! Who may connect and who may send to what (docs/SECURITY.md):
//! - [`Clients`]: the `[[client]]` tables, found by the token a HELLO
//!   presents;
//! - [`Acl`]: one instance's `dest_list_allow` / `dest_list_deny`, with its
//!   decisions cached per name;
//! - [`overlaps_prefix`]: whether a subscription could take names under a
//!   configured service's prefix.

use cumulo_config::{ClientConfig, ServiceOptions};
use std::cell::RefCell;
use std::rc::Rc;

/// Names whose decision one instance remembers; past this the cache is
/// emptied and fills again (a sender cycling through names costs a match
/// per send, never memory).
const ACL_CACHE_NAMES: usize = 1024;
/// Bytes of names that cache may hold.
const ACL_CACHE_BYTES: usize = 256 * 1024;

/// The listener a connection came through: an instance without a token
/// is held to `core.tcp_anonymous` or `core.unix_anonymous`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Unix,
    Tcp,
}

/// One named client, admitted by its token.
pub(crate) struct Client {
    pub(crate) name: Rc<str>,
    token: Box<[u8]>,
    prefixes: Vec<Box<str>>,
    pub(crate) options: Rc<ServiceOptions>,
}

impl Client {
    /// Whether its HELLO may claim `prefix`.
    pub(crate) fn may_claim(&self, prefix: &str) -> bool {
        self.prefixes.iter().any(|p| prefix.starts_with(&**p))
    }

    /// The prefixes it may claim, for an error message.
    pub(crate) fn prefixes(&self) -> String {
        self.prefixes.join(", ")
    }
}

/// The `[[client]]` tables of the config.
#[derive(Default)]
pub struct Clients(Vec<Client>);

impl Clients {
    /// Each client's options are the unmanaged ones with its own lists.
    pub fn new(clients: &[ClientConfig], unmanaged: &ServiceOptions) -> Clients {
        let one = |c: &ClientConfig| Client {
            name: Rc::from(c.name.as_str()),
            token: c.secret().as_bytes().into(),
            prefixes: c.prefixes.iter().map(|p| p.as_str().into()).collect(),
            options: Rc::new(ServiceOptions {
                dest_list_allow: c.dest_list_allow.clone(),
                dest_list_deny: c.dest_list_deny.clone(),
                ..unmanaged.clone()
            }),
        };
        Clients(clients.iter().map(one).collect())
    }

    /// The client whose token this is. Every token is compared, each in
    /// constant time, so the time taken says nothing of which one (or how
    /// much of one) matched.
    pub(crate) fn find(&self, token: &str) -> Option<&Client> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        for c in &self.0 {
            if bool::from(c.token.ct_eq(token.as_bytes())) {
                found = Some(c);
            }
        }
        found
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An instance's send rules. The deny list is checked first (as CloudI
/// does); with an allow list, a name must match one of its patterns.
pub(crate) struct Acl {
    allow: Option<Box<[Box<str>]>>,
    deny: Box<[Box<str>]>,
    cache: RefCell<Cache>,
}

#[derive(Default)]
struct Cache {
    /// The name decided last and its decision: a sender mostly sends to
    /// the same name again, and comparing it costs less than hashing it.
    /// Its buffer is reused (no allocation per change of name).
    last_name: String,
    last: Option<bool>,
    decisions: ahash::AHashMap<Box<str>, bool>,
    bytes: usize,
}

impl Acl {
    /// None when the options set neither list: such an instance is never
    /// checked (one branch per send).
    pub(crate) fn of(o: &ServiceOptions) -> Option<Box<Acl>> {
        if o.dest_list_allow.is_none() && o.dest_list_deny.is_empty() {
            return None;
        }
        let boxed = |l: &[String]| l.iter().map(|p| p.as_str().into()).collect();
        Some(Box::new(Acl {
            allow: o.dest_list_allow.as_deref().map(boxed),
            deny: boxed(&o.dest_list_deny),
            cache: RefCell::default(),
        }))
    }

    /// Whether this instance may send to `name`; `Err` says why not.
    pub(crate) fn check(&self, name: &str) -> Result<(), String> {
        let mut c = self.cache.borrow_mut();
        let allowed = match c.last {
            Some(a) if c.last_name == name => a,
            _ => {
                let a = match c.decisions.get(name) {
                    Some(a) => *a,
                    None => {
                        let a = self.decide(name);
                        if c.decisions.len() >= ACL_CACHE_NAMES || c.bytes + name.len() > ACL_CACHE_BYTES {
                            c.decisions.clear();
                            c.bytes = 0;
                        }
                        c.bytes += name.len();
                        c.decisions.insert(name.into(), a);
                        a
                    }
                };
                c.last_name.clear();
                c.last_name.push_str(name);
                c.last = Some(a);
                a
            }
        };
        match allowed {
            true => Ok(()),
            false => Err(format!("this sender may not send to '{name}' (its dest_list_allow / dest_list_deny)")),
        }
    }

    fn decide(&self, name: &str) -> bool {
        let hit = |l: &[Box<str>]| l.iter().any(|p| cumulo_pattern::matches(p, name));
        !hit(&self.deny) && self.allow.as_deref().is_none_or(hit)
    }
}

/// Whether `pattern` could match a name that starts with `prefix` (a
/// configured service's): their literal heads, up to the first wildcard,
/// are one a prefix of the other. Conservative: "/" + "*" overlaps every
/// prefix.
pub(crate) fn overlaps_prefix(pattern: &str, prefix: &str) -> bool {
    let (p, s) = (cumulo_pattern::literal_prefix(pattern), cumulo_pattern::literal_prefix(prefix));
    let p_wild = p.len() < pattern.len();
    let s_wild = s.len() < prefix.len();
    match (p_wild, s_wild) {
        // A literal name is under the prefix, or the prefix's wildcard
        // could reach it.
        (false, false) => p.starts_with(s),
        _ => p.starts_with(s) || s.starts_with(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(allow: Option<&[&str]>, deny: &[&str]) -> ServiceOptions {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        ServiceOptions { dest_list_allow: allow.map(v), dest_list_deny: v(deny), ..ServiceOptions::default() }
    }

    #[test]
    fn no_lists_no_acl() {
        assert!(Acl::of(&ServiceOptions::default()).is_none());
    }

    #[test]
    fn deny_first_then_allow() {
        let acl = Acl::of(&opts(Some(&["/db/*", "/public/"]), &["/db/admin/*"])).unwrap();
        assert!(acl.check("/db/users").is_ok());
        assert!(acl.check("/public/").is_ok());
        assert!(acl.check("/db/admin/drop").is_err());
        assert!(acl.check("/other/x").is_err());
        assert!(acl.check("/public/x").is_err(), "a literal pattern is one name");
        // Cached decisions answer the same.
        assert!(acl.check("/db/users").is_ok());
        assert!(acl.check("/db/admin/drop").is_err());
    }

    #[test]
    fn deny_only_allows_the_rest() {
        let acl = Acl::of(&opts(None, &["/bank/*"])).unwrap();
        assert!(acl.check("/bank/transfer").is_err());
        assert!(acl.check("/echo/").is_ok());
    }

    #[test]
    fn the_cache_is_bounded() {
        let acl = Acl::of(&opts(None, &["/x/*"])).unwrap();
        for i in 0..(ACL_CACHE_NAMES * 3) {
            assert!(acl.check(&format!("/n/{i}")).is_ok());
            assert!(acl.cache.borrow().decisions.len() <= ACL_CACHE_NAMES);
        }
        let long = "/n/".to_string() + &"a".repeat(4000);
        for i in 0..200 {
            assert!(acl.check(&format!("{long}{i}")).is_ok());
            assert!(acl.cache.borrow().bytes <= ACL_CACHE_BYTES);
        }
    }

    #[test]
    fn overlap_with_a_service_prefix() {
        assert!(overlaps_prefix("/bank/*", "/bank/"));
        assert!(overlaps_prefix("/bank/transfer", "/bank/"));
        assert!(overlaps_prefix("/*", "/bank/"));
        assert!(overlaps_prefix("/ba*", "/bank/"));
        assert!(!overlaps_prefix("/tools/*", "/bank/"));
        assert!(!overlaps_prefix("/ban", "/bank/"), "a literal name shorter than the prefix is not under it");
        assert!(overlaps_prefix("/x/y", "/*/"), "a service prefix with a wildcard");
        assert!(!overlaps_prefix("/tools/x", "/bank/*/"));
    }

    #[test]
    fn clients_by_token() {
        let c = |name: &str, token: &str| ClientConfig {
            name: name.into(),
            token: Some(token.into()),
            prefixes: vec!["/t/".into()],
            ..ClientConfig::default()
        };
        let clients =
            Clients::new(&[c("a", "aaaaaaaaaaaaaaaa"), c("b", "bbbbbbbbbbbbbbbb")], &ServiceOptions::default());
        assert_eq!(&*clients.find("bbbbbbbbbbbbbbbb").unwrap().name, "b");
        assert!(clients.find("bbbbbbbbbbbbbbb").is_none());
        assert!(clients.find("").is_none());
        assert!(clients.find("a").is_none());
        assert!(clients.find("aaaaaaaaaaaaaaaa").unwrap().may_claim("/t/x/"));
        assert!(!clients.find("aaaaaaaaaaaaaaaa").unwrap().may_claim("/u/"));
    }
}
