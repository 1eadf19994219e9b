//! The admin token: with one configured every call needs it; a non-loopback
//! admin address without one is refused before anything starts.

use crate::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn with_a_token_every_call_needs_it() {
    let core = TestCore::start_with("", Some("s3cret-t0ken"));
    for path in ["/v1/status", "/v1/services", "/metrics", "/v1/openapi.json", "/v1/nothing"] {
        for token in [None, Some("wrong"), Some("s3cret-t0ke"), Some("s3cret-t0ken-")] {
            let r = core.try_http("GET", path, None, token.map(String::from)).unwrap();
            assert_eq!(r.status, 401, "{path} with {token:?}: {}", r.body);
            assert_eq!(r.json()["code"], "unauthorized");
            assert!(r.headers.to_ascii_lowercase().contains("www-authenticate: bearer"), "{}", r.headers);
        }
    }
    let r = core.try_http("POST", "/v1/services", Some(r#"{"prefix": "/e/", "internal": "echo"}"#), None).unwrap();
    assert_eq!(r.status, 401, "a refused call changes nothing");
    assert_eq!(core.get("/v1/services")["services"].as_array().unwrap().len(), 0);
    assert_eq!(core.http("GET", "/metrics", None).status, 200);

    // the CLI: with the token it works, without it the error says what to do
    let out =
        Command::new(CUMULO).args(["status", "--admin", &core.url(), "--token", "s3cret-t0ken"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(CUMULO)
        .args(["status", "--admin", &core.url()])
        .env_remove("CUMULO_ADMIN_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unauthorized") && err.contains("--token"), "{err}");
}

#[test]
fn a_non_loopback_admin_address_without_token_is_refused() {
    let dir = std::env::temp_dir().join(format!("cumulo-e2e-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("open.toml");
    std::fs::write(
        &cfg,
        format!("[core]\nsocket = \"{}\"\n[admin]\naddress = \"0.0.0.0\"\nport = 7399\n", dir.join("s.sock").display()),
    )
    .unwrap();
    let out = Command::new(CUMULO).args(["check", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("admin.token") && err.contains("0.0.0.0") && err.contains("not a loopback address"), "{err}");

    // `run` stops at once with the same reason, before binding anything
    let start = Instant::now();
    let out = Command::new(CUMULO).args(["run", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && start.elapsed() < Duration::from_secs(5));
    assert!(err.contains("admin.token") && err.contains("not a loopback address"), "{err}");
    assert!(!dir.join("s.sock").exists(), "nothing was started");

    // with a token it is a valid config
    std::fs::write(&cfg, "[admin]\naddress = \"0.0.0.0\"\ntoken = \"long-random-token\"\n").unwrap();
    let out = Command::new(CUMULO).args(["check", "--config"]).arg(&cfg).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
