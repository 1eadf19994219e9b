//! Settings, the up/down rule, and checks against loopback (end to end:
//! tests/tests/services/health_check.rs).

use crate::probe::{check, Failure};
use crate::settings::{Settings, Target};
use crate::state::{Change, Health, HostState};
use std::time::{Duration, Instant};

fn settings(s: &str) -> Result<Settings, String> {
    Settings::from_settings(&toml::from_str(s).unwrap())
}

#[test]
fn settings_are_checked_with_their_field_and_reason() {
    let ok =
        settings("hosts = [{ url = \"http://127.0.0.1:1/\" }, { name = \"db\", tcp = \"db.local:5432\" }]").unwrap();
    assert_eq!(ok.hosts[0].name, "http://127.0.0.1:1/");
    assert_eq!(ok.hosts[1].target, Target::Tcp { host: "db.local".into(), port: 5432 });
    let cases = [
        ("", "health_check: hosts: required"),
        ("hosts = []", "health_check: hosts: required"),
        ("hosts = [{ url = \"ftp://x/\" }]", "health_check: hosts[0].url: bad URL"),
        ("hosts = [{ tcp = \"x\" }]", "health_check: hosts[0].tcp: 'x' is not host:port"),
        ("hosts = [{ tcp = \"x:1\", expect_status = 200 }]", "health_check: hosts[0].expect_status: only for a url"),
        ("hosts = [{ url = \"http://x/\", tcp = \"x:1\" }]", "health_check: hosts[0]: needs one of url or tcp"),
        ("hosts = [{ url = \"http://x/\", expect_status = 99 }]", "health_check: hosts[0].expect_status"),
        ("hosts = [{ url = \"http://x/\", colour = 1 }]", "health_check: hosts[0].colour: unknown key"),
        ("hosts = [{ tcp = \"x:1\" }, { tcp = \"x:1\" }]", "health_check: hosts: two hosts named 'x:1'"),
        ("hosts = [{ tcp = \"x:1\" }]\ninterval_ms = 100\ntimeout_ms = 200", "health_check: timeout_ms"),
        ("hosts = [{ tcp = \"x:1\" }]\nnotify = [\"x\"]", "health_check: notify"),
        ("hosts = [{ tcp = \"x:1\" }]\nca_file = \"/nonexistent.pem\"", "health_check: ca_file"),
        ("hosts = [{ tcp = \"x:1\" }]\nsurprise = 1", "health_check: surprise: unknown setting"),
    ];
    for (s, why) in cases {
        let e = settings(s).unwrap_err();
        assert!(e.starts_with(why), "{s}: {e}");
    }
}

#[test]
fn a_host_goes_down_after_down_after_failures_and_up_at_the_first_pass() {
    let t0 = Instant::now();
    let mut h = HostState::new(t0);
    let fail = || Err(Failure { kind: "connect", why: "refused".into() });
    assert_eq!(h.record(Ok(Duration::from_millis(1)), t0, 2), None, "up at the first check is no news");
    assert_eq!(h.health, Health::Up);
    assert_eq!(h.record(fail(), t0 + Duration::from_secs(1), 2), None, "one failure of the two needed");
    assert_eq!(h.health, Health::Up);
    let down = h.record(fail(), t0 + Duration::from_secs(2), 2);
    assert!(matches!(down, Some(Change::Down(ref f)) if f.kind == "connect"), "{down:?}");
    assert_eq!(h.record(fail(), t0 + Duration::from_secs(3), 2), None, "down once");
    let up = h.record(Ok(Duration::from_millis(1)), t0 + Duration::from_secs(7), 2);
    assert_eq!(up, Some(Change::Up { down_for: Duration::from_secs(5) }));
    assert_eq!((h.checks, h.failed), (5, 3));
    let mut never = HostState::new(t0);
    assert!(matches!(never.record(fail(), t0, 1), Some(Change::Down(_))), "down at the first check is news");
}

#[test]
fn checks_name_the_step_that_failed() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    tokio::task::LocalSet::new().block_on(&rt, async {
        let s = settings("hosts = [{ tcp = \"x:1\" }]").unwrap();
        let client = cumulo_http_client::Client::new(&s.client_settings().unwrap(), 1024).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let t = Duration::from_secs(5);
        let tcp = |port| Target::Tcp { host: "127.0.0.1".into(), port };
        assert!(check(&tcp(open), &client, t).await.is_ok());
        assert_eq!(check(&tcp(closed), &client, t).await.unwrap_err().kind, "connect");
        let nowhere = Target::Tcp { host: "nosuch.invalid".into(), port: 80 };
        assert_eq!(check(&nowhere, &client, t).await.unwrap_err().kind, "dns");
        let url = Target::Http { url: format!("http://127.0.0.1:{closed}/"), expect_status: 200 };
        assert_eq!(check(&url, &client, t).await.unwrap_err().kind, "connect");
        // accepts and never answers: the check's own timeout
        let silent = Target::Http { url: format!("http://127.0.0.1:{open}/"), expect_status: 200 };
        let f = check(&silent, &client, Duration::from_millis(200)).await.unwrap_err();
        assert_eq!(f.kind, "timeout", "{f:?}");
    });
}
