//! The admin token: with one configured every call needs it; a non-loopback
//! admin address without one is refused before anything starts.

use crate::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn with_a_token_every_call_needs_it() {
    let core = TestCore::start_with("", Some("s3cret-t0ken"));
    // Each path's wrong tokens from an address of its own: ten wrong ones
    // from one address would have it refused for a while (below).
    for (i, path) in ["/v1/status", "/v1/services", "/metrics", "/v1/openapi.json", "/v1/nothing"].iter().enumerate() {
        let from = Some(std::net::Ipv4Addr::new(127, 0, 0, 10 + i as u8));
        for token in [None, Some("wrong"), Some("s3cret-t0ke"), Some("s3cret-t0ken-")] {
            let r = raw_http_from(from, core.port, "GET", path, None, token).unwrap();
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

/// A folder of the test's own for token files (outside the core's, which
/// the core's start clears).
fn secrets_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cumulo-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_secret(path: &std::path::Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const OPERATE: &str = "operate-t0ken";
const READ: &str = "read-t0ken-from-a-file";

/// A core with an operate token (`[admin] token`) and a read token read
/// from a file (`[[admin.tokens]]`).
fn core_with_roles(dir: &std::path::Path) -> TestCore {
    let file = dir.join("grafana.token");
    write_secret(&file, &format!("{READ}\n"), 0o600);
    let tokens = format!("[[admin.tokens]]\nname = \"grafana\"\nrole = \"read\"\ntoken_file = {}\n", toml_str(&file));
    TestCore::start_with(&tokens, Some(OPERATE))
}

#[test]
fn a_read_token_reads_and_every_changing_route_refuses_it() {
    use cumulo_core::admin::routes::ROUTES;
    let dir = secrets_dir("roles");
    let core = core_with_roles(&dir);
    let call = |method: &str, path: &str, token: &str| core.try_http(method, path, None, Some(token.into())).unwrap();
    // Every route of the server's own table: a new one cannot be missed.
    for &(method, template, _) in ROUTES {
        let path = template.replace("{id}", "1");
        let read = call(method, &path, READ);
        let operate = call(method, &path, OPERATE);
        assert!(![401, 403].contains(&operate.status), "{method} {path} with the operate token: {}", operate.body);
        if method == "GET" {
            assert!(![401, 403].contains(&read.status), "{method} {path} with the read token: {}", read.body);
        } else {
            assert_eq!(read.status, 403, "{method} {path} with the read token: {}", read.body);
            let v = read.json();
            assert_eq!(v["code"], "forbidden");
            let message = v["message"].as_str().unwrap();
            assert!(message.contains("'grafana' has the role read") && message.contains("operate"), "{message}");
        }
    }
    assert_eq!(call("GET", "/v1/status", READ).status, 200);
    assert!(call("GET", "/metrics", READ).body.contains("cumulo_requests_total"));
    // what the dashboard asks to know which buttons to show
    assert_eq!(call("GET", "/v1/whoami", READ).json(), serde_json::json!({"role": "read", "name": "grafana"}));
    assert_eq!(call("GET", "/v1/whoami", OPERATE).json(), serde_json::json!({"role": "operate", "name": "admin"}));
    // a refused change changed nothing
    let add = r#"{"prefix": "/e/", "internal": "echo"}"#;
    assert_eq!(core.try_http("POST", "/v1/services", Some(add), Some(READ.into())).unwrap().status, 403);
    assert_eq!(core.get("/v1/services")["services"].as_array().unwrap().len(), 0);
    assert_eq!(core.try_http("POST", "/v1/services", Some(add), Some(OPERATE.into())).unwrap().status, 201);

    // wrong tokens stay 401, and are counted
    for wrong in ["operate-t0ke", "read-t0ken-from-a-fil", "READ-t0ken-from-a-file"] {
        assert_eq!(call("GET", "/v1/status", wrong).status, 401, "{wrong}");
    }
    let metrics = call("GET", "/metrics", READ).body;
    let failures = metrics.lines().find(|l| l.starts_with("cumulo_admin_auth_failures_total ")).unwrap();
    assert_eq!(failures, "cumulo_admin_auth_failures_total 3", "{metrics}");

    // the CLI: a read token from a file lists, and is told why it cannot change
    let out = Command::new(CUMULO)
        .args(["services", "list", "--admin", &core.url()])
        .env("CUMULO_ADMIN_TOKEN_FILE", dir.join("grafana.token"))
        .env_remove("CUMULO_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("/e/"), "{out:?}");
    let out = Command::new(CUMULO)
        .args(["log-level", "debug", "--admin", &core.url(), "--token-file"])
        .arg(dir.join("grafana.token"))
        .env_remove("CUMULO_ADMIN_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("HTTP 403") && err.contains("role operate"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn guessing_tokens_gets_that_address_429_for_a_while() {
    let core = TestCore::start_with("", Some(OPERATE));
    let guesser = Some(std::net::Ipv4Addr::new(127, 0, 0, 2));
    let from = |token: &str| raw_http_from(guesser, core.port, "GET", "/v1/status", None, Some(token)).unwrap();
    for i in 0..10 {
        assert_eq!(from(&format!("guess-{i}")).status, 401);
    }
    // now refused without a look at the token, even the right one
    for token in ["guess-10", OPERATE] {
        let r = from(token);
        assert_eq!(r.status, 429, "{}", r.body);
        assert_eq!(r.json()["code"], "too_many_failures");
        let retry: u64 = header(&r, "retry-after").expect("Retry-After").parse().unwrap();
        assert!((1..=61).contains(&retry), "{retry}");
    }
    // another address is not held back
    assert_eq!(core.http("GET", "/v1/status", None).status, 200);
    let metrics = core.http("GET", "/metrics", None).body;
    assert!(metrics.contains("\ncumulo_admin_auth_failures_total 10\n"), "{metrics}");
    assert!(metrics.contains("\ncumulo_admin_auth_throttled_total 2\n"), "{metrics}");
    // logged with the address, once per interval rather than per guess
    let log = core.log_text();
    assert!(log.contains("wrong tokens presented, the last from 127.0.0.2"), "{log}");
    assert!(log.contains("127.0.0.2 refused for 60 s after 10 wrong tokens within 60 s"), "{log}");
    assert_eq!(log.matches("wrong tokens presented, the last from").count(), 1, "{log}");
}

fn header<'h>(r: &'h Http, name: &str) -> Option<&'h str> {
    r.headers.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn a_token_file_open_to_others_stops_the_start() {
    let dir = secrets_dir("token-file");
    let file = dir.join("admin.token");
    write_secret(&file, "s3cret-from-a-file\n", 0o644);
    let cfg = dir.join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "[core]\nsocket = {}\n[admin]\nport = 0\ntoken_file = \"admin.token\"\n",
            toml_str(&dir.join("s.sock"))
        ),
    )
    .unwrap();
    for cmd in ["check", "run"] {
        let out = Command::new(CUMULO).args([cmd, "--config"]).arg(&cfg).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd}: {err}");
        assert!(
            err.contains("admin.token_file")
                && err.contains("open to other users (mode 644)")
                && err.contains("chmod 600"),
            "{cmd}: {err}"
        );
    }
    assert!(!dir.join("s.sock").exists(), "nothing was started");
    // private to its owner, it is the core's token (relative to the config's folder)
    write_secret(&file, "s3cret-from-a-file\n", 0o600);
    let out = Command::new(CUMULO).args(["check", "--config"]).arg(&cfg).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_token_file_is_the_token() {
    let dir = secrets_dir("token-file-run");
    let file = dir.join("admin.token");
    write_secret(&file, "s3cret-from-a-file\n", 0o600);
    let core = TestCore::start_token_file(&file, "s3cret-from-a-file");
    assert_eq!(core.try_http("GET", "/v1/status", None, None).unwrap().status, 401);
    let ok = core.try_http("GET", "/v1/status", None, Some("s3cret-from-a-file".into())).unwrap();
    assert_eq!(ok.status, 200, "{}", ok.body);
    // the CLI reads it through the core's config
    let out = Command::new(CUMULO)
        .args(["status", "--config"])
        .arg(&core.config)
        .env_remove("CUMULO_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
