//! The client commands against a running core: add, list, update, restart,
//! remove, status, log-level; address and token from flags, environment or
//! the core's config file; a clear error when no core is there.

use crate::common::*;
use std::process::{Command, Output};

fn cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(CUMULO);
    c.args(args).env_remove("CUMULO_ADMIN").env_remove("CUMULO_ADMIN_TOKEN");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn ok(out: &Output) -> String {
    let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "exit {:?}\nstdout: {o}\nstderr: {e}", out.status);
    o.into_owned()
}

#[test]
fn operate_a_core_from_the_command_line() {
    let core = TestCore::start_with("[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n", Some("cli-t0ken"));
    let url = core.url();
    let flags = ["--admin", url.as_str(), "--token", "cli-t0ken"];
    let with = |args: &[&str]| cli(&[args, &flags[..]].concat(), &[]);

    let list = ok(&with(&["services", "list"]));
    let mut lines = list.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("ID  PREFIX  KIND      STATUS   PROCESSES"), "{list}");
    let row = lines.next().unwrap();
    assert!(row.starts_with(" 1  /e/     internal  running"), "{list}");
    // columns line up: every row's STATUS starts where the header's does
    assert_eq!(header.find("STATUS"), row.find("running"));

    // a TOML file whose relative path is relative to the file
    let dir = core.dir.join("more");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::os::unix::fs::symlink(http_req(), dir.join("bin/http_req")).unwrap();
    std::fs::write(dir.join("svc.toml"), "[[service]]\nprefix = \"/tests/http_req/\"\npath = \"bin/http_req\"\n")
        .unwrap();
    let added = ok(&with(&["services", "add", dir.join("svc.toml").to_str().unwrap()]));
    assert_eq!(added, "added service 2 (/tests/http_req/)\n");
    core.wait_running(2, 1);
    let added = ok(&with(&["services", "add", "--json", r#"[{"prefix": "/e2/", "internal": "echo"}]"#]));
    assert_eq!(added, "added service 3 (/e2/)\n");

    let out = ok(&with(&["services", "update", "2", "--count-process", "2", "--timeout-sync", "3000"]));
    assert!(out.starts_with("updated service 2 (/tests/http_req/): count_process = 2, timeout_sync = 3000"), "{out}");
    core.wait_running(2, 2);
    let out = ok(&with(&["services", "restart", "2"]));
    assert!(out.starts_with("restarting service 2"), "{out}");
    core.wait_running(2, 2);

    let status = ok(&with(&["status"]));
    assert!(status.contains("services:  3 (3 running)"), "{status}");
    let json = ok(&with(&["status", "--output", "json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["services"]["total"], 3);

    assert_eq!(ok(&with(&["log-level", "debug"])), "log level: debug (was info)\n");
    assert_eq!(core.get("/v1/log-level")["level"], "debug");

    let out = ok(&with(&["services", "remove", "2"]));
    assert_eq!(out, "removed service 2 (/tests/http_req/): 2 processes stopped\n");

    // the same from the environment, and from the core's config file
    let env_list = ok(&cli(&["services", "list"], &[("CUMULO_ADMIN", &url), ("CUMULO_ADMIN_TOKEN", "cli-t0ken")]));
    let cfg_list = ok(&cli(&["services", "list", "--config", core.config.to_str().unwrap()], &[]));
    assert_eq!(env_list, cfg_list);
    assert!(!env_list.contains("/tests/http_req/") && env_list.contains("/e2/"), "{env_list}");

    // refused by the API: the message, the code and exit 1
    let out = with(&["services", "update", "1", "--count-process", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("count_process: must be 1 .. 1024") && err.contains("HTTP 400"),
        "{err}"
    );
    let out = with(&["services", "remove", "42"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no service with id 42"));
}

#[test]
fn no_core_there_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = cli(&["services", "list", "--admin", &format!("http://127.0.0.1:{port}")], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.contains(&format!("cannot reach the cumulo admin API at http://127.0.0.1:{port}")), "{err}");
    assert!(err.contains("is the core running"), "{err}");
    let out = cli(&["status", "--admin", "https://127.0.0.1:1"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("only http://"));
}
