//! Who may call the admin API: the tokens of `[admin]`, each with a role,
//! and the brake on guessing them. A token is compared with every
//! configured one in constant time, so neither the time taken nor which one
//! matched tells a guesser anything. Wrong tokens are counted per peer IP:
//! past [`MAX_FAILURES`] within [`FAILURE_WINDOW`] that IP is answered 429
//! for [`BLOCK_FOR`] without its token being compared.

use super::reply::ApiError;
use cumulo_config::{AdminToken, Role};
use cumulo_sys::Throttle;
use hyper::{header, StatusCode};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Wrong tokens one IP may present within [`FAILURE_WINDOW`].
pub const MAX_FAILURES: u32 = 10;
/// The window failures are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// How long an IP past [`MAX_FAILURES`] is refused.
pub const BLOCK_FOR: Duration = Duration::from_secs(60);
/// IPs whose failures are remembered; past it the one whose window began
/// first is forgotten, so a guesser with many addresses cannot grow the table.
pub const MAX_PEERS: usize = 1024;

/// Who a call comes from, once its token matched (or no token is needed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name; `None` when the core has no token.
    pub name: Option<String>,
    pub role: Role,
}

/// Failures of one peer within its window.
struct Strikes {
    since: Instant,
    count: u32,
    blocked_until: Option<Instant>,
}

pub struct Guard {
    tokens: Vec<AdminToken>,
    peers: RefCell<HashMap<IpAddr, Strikes>>,
    failures: Cell<u64>,
    refused: Cell<u64>,
    /// One warning per interval however many guesses arrive.
    failure_log: RefCell<Throttle>,
    block_log: RefCell<Throttle>,
}

impl Guard {
    pub fn new(tokens: Vec<AdminToken>) -> Guard {
        Guard {
            tokens,
            peers: RefCell::default(),
            failures: Cell::new(0),
            refused: Cell::new(0),
            failure_log: RefCell::default(),
            block_log: RefCell::default(),
        }
    }

    pub fn requires_token(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Failed authentications since the start (`cumulo_admin_auth_failures_total`).
    pub fn failures(&self) -> u64 {
        self.failures.get()
    }

    /// Calls answered 429 because their IP guessed too often
    /// (`cumulo_admin_auth_throttled_total`).
    pub fn refused(&self) -> u64 {
        self.refused.get()
    }

    /// The caller presenting `given` from `peer`: 429 while `peer` is
    /// blocked, 401 without a token or with a wrong one.
    pub fn check(&self, peer: IpAddr, given: Option<&header::HeaderValue>) -> Result<Caller, ApiError> {
        if self.tokens.is_empty() {
            return Ok(Caller { name: None, role: Role::Operate });
        }
        let now = Instant::now();
        if let Some(left) = self.blocked_for(peer, now) {
            self.refused.set(self.refused.get() + 1);
            return Err(too_many_failures(left));
        }
        let Some(given) = given else {
            // Counted, but no guess: a scraper or a page not yet given its
            // token must not get its address refused.
            self.failures.set(self.failures.get() + 1);
            return Err(unauthorized("this core requires a token: send the header 'Authorization: Bearer <token>'"));
        };
        let presented = given.as_bytes().strip_prefix(b"Bearer ").unwrap_or(b"");
        match matching(&self.tokens, presented) {
            Some(t) => Ok(Caller { name: Some(t.name.clone()), role: t.role }),
            None => {
                self.fail(peer, now);
                Err(unauthorized("wrong token"))
            }
        }
    }

    /// The time `peer` has left to wait, if it is blocked.
    fn blocked_for(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let peers = self.peers.borrow();
        let until = peers.get(&peer)?.blocked_until?;
        (until > now).then(|| until - now)
    }

    fn fail(&self, peer: IpAddr, now: Instant) {
        self.failures.set(self.failures.get() + 1);
        self.failure_log.borrow_mut().warn(|n| format!("admin API: {n} wrong tokens presented, the last from {peer}"));
        let mut peers = self.peers.borrow_mut();
        if !peers.contains_key(&peer) && peers.len() >= MAX_PEERS {
            let oldest = peers.iter().min_by_key(|(_, s)| s.since).map(|(ip, _)| *ip);
            peers.remove(&oldest.expect("the table is full"));
        }
        let s = peers.entry(peer).or_insert(Strikes { since: now, count: 0, blocked_until: None });
        if now.duration_since(s.since) > FAILURE_WINDOW || s.blocked_until.is_some_and(|t| t <= now) {
            *s = Strikes { since: now, count: 0, blocked_until: None };
        }
        s.count += 1;
        if s.count >= MAX_FAILURES {
            s.blocked_until = Some(now + BLOCK_FOR);
            self.block_log.borrow_mut().warn(|n| {
                format!(
                    "admin API: {peer} refused for {} s after {MAX_FAILURES} wrong tokens within {} s \
                     ({n} addresses refused since the last warning)",
                    BLOCK_FOR.as_secs(),
                    FAILURE_WINDOW.as_secs()
                )
            });
        }
    }
}

/// The token `presented` is, compared with every one (no early exit).
fn matching<'t>(tokens: &'t [AdminToken], presented: &[u8]) -> Option<&'t AdminToken> {
    let mut found = None;
    for t in tokens {
        let same = same_bytes(presented, t.secret.as_bytes());
        if same && found.is_none() {
            found = Some(t);
        }
    }
    found
}

/// Equality whose time depends on the lengths only, never on where the
/// bytes first differ.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

fn too_many_failures(left: Duration) -> ApiError {
    let secs = left.as_secs() + 1;
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_failures",
        format!(
            "{MAX_FAILURES} wrong tokens from this address within {} s: try again in {secs} s",
            FAILURE_WINDOW.as_secs()
        ),
    );
    e.retry_after = Some(secs);
    e
}

/// `GET /v1/whoami`: the role of the token the call carries (and its
/// name), so that a client such as the dashboard can offer only what it
/// may do. Without a token configured every caller may operate.
pub fn whoami(caller: Option<&Caller>) -> super::reply::Answer {
    let (name, role) = caller.map_or((None, Role::Operate), |c| (c.name.as_deref(), c.role));
    Ok((StatusCode::OK, serde_json::json!({ "role": role.as_str(), "name": name })))
}

/// A `read` token on a call that changes something: 403 naming the role.
pub fn forbidden(caller: &Caller, method: &str, path: &str) -> ApiError {
    let name = caller.name.as_deref().unwrap_or("");
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "the token '{name}' has the role {}: {method} {path} needs the role {}",
            caller.role.as_str(),
            Role::Operate.as_str()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(name: &str, role: Role, secret: &str) -> AdminToken {
        AdminToken { name: name.into(), role, secret: secret.into(), token_file: None, at: String::new() }
    }

    fn bearer(s: &str) -> header::HeaderValue {
        header::HeaderValue::from_str(&format!("Bearer {s}")).unwrap()
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn each_token_gives_its_role_and_anything_else_is_401() {
        let g = Guard::new(vec![token("ops", Role::Operate, "abc"), token("grafana", Role::Read, "abd")]);
        assert_eq!(g.check(PEER, Some(&bearer("abc"))).unwrap().role, Role::Operate);
        let read = g.check(PEER, Some(&bearer("abd"))).unwrap();
        assert_eq!((read.name.as_deref(), read.role), (Some("grafana"), Role::Read));
        let h = |s: &str| header::HeaderValue::from_str(s).unwrap();
        for wrong in ["Bearer abe", "Bearer ab", "abc", "Basic abc", "Bearer abc "] {
            let e = g.check(PEER, Some(&h(wrong))).unwrap_err();
            assert_eq!((e.status, e.code), (StatusCode::UNAUTHORIZED, "unauthorized"), "{wrong}");
        }
        assert!(g.check(PEER, None).unwrap_err().message.contains("Authorization: Bearer"));
        assert_eq!(g.failures(), 6);
        let open = Guard::new(Vec::new());
        assert_eq!(open.check(PEER, None).unwrap(), Caller { name: None, role: Role::Operate });
    }

    #[test]
    fn calls_without_a_token_are_counted_but_never_block() {
        let g = Guard::new(vec![token("ops", Role::Operate, "right")]);
        for _ in 0..3 * MAX_FAILURES {
            assert_eq!(g.check(PEER, None).unwrap_err().status, StatusCode::UNAUTHORIZED);
        }
        assert!(g.check(PEER, Some(&bearer("right"))).is_ok());
        assert_eq!(g.failures(), 3 * MAX_FAILURES as u64);
    }

    #[test]
    fn guessing_blocks_that_ip_only_even_with_the_right_token() {
        let g = Guard::new(vec![token("ops", Role::Operate, "right")]);
        for _ in 0..MAX_FAILURES {
            assert_eq!(g.check(PEER, Some(&bearer("wrong"))).unwrap_err().status, StatusCode::UNAUTHORIZED);
        }
        let e = g.check(PEER, Some(&bearer("right"))).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::TOO_MANY_REQUESTS, "too_many_failures"));
        assert!(e.retry_after.is_some_and(|s| s > 0 && s <= BLOCK_FOR.as_secs() + 1));
        assert_eq!((g.failures(), g.refused()), (MAX_FAILURES as u64, 1));
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        assert!(g.check(other, Some(&bearer("right"))).is_ok());
    }

    #[test]
    fn the_peer_table_stays_bounded() {
        let g = Guard::new(vec![token("ops", Role::Operate, "right")]);
        for i in 0..(MAX_PEERS as u32 + 100) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = g.check(ip, Some(&bearer("wrong")));
        }
        assert_eq!(g.peers.borrow().len(), MAX_PEERS);
        let first = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000));
        assert!(!g.peers.borrow().contains_key(&first), "the oldest is forgotten first");
    }

    #[test]
    fn comparison_needs_every_byte() {
        assert!(same_bytes(b"abc", b"abc"));
        assert!(!same_bytes(b"abc", b"abd") && !same_bytes(b"ab", b"abc") && !same_bytes(b"abc\0", b"abc"));
        assert!(!same_bytes(b"", b"a") && same_bytes(b"", b""));
    }
}
