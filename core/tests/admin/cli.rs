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

#[test]
fn show_and_subscriptions_print_text_with_the_patterns_json_on_request() {
    let core = TestCore::start("[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\n");
    core.wait_running(1, 1);
    core.wait_subscribed("/e/*", 1);
    let url = core.url();
    let with = |args: &[&str]| cli(&[args, &["--admin", url.as_str()][..]].concat(), &[]);

    let show = ok(&with(&["services", "show", "1"]));
    assert!(show.starts_with("service 1: /e/ (internal: echo), running\n"), "{show}");
    assert!(show.lines().any(|l| l.starts_with("subscribes:") && l.contains("/e/* (1 instance)")), "{show}");
    assert!(show.contains("queue_size = 67108864"), "the configuration is shown: {show}");
    let json: serde_json::Value = serde_json::from_str(&ok(&with(&["services", "show", "1", "-o", "json"]))).unwrap();
    assert_eq!((json["id"].as_u64(), json["prefix"].as_str()), (Some(1), Some("/e/")));

    let list = ok(&with(&["services", "list"]));
    let (header, row) = (list.lines().next().unwrap(), list.lines().nth(1).unwrap());
    assert!(header.contains("PATTERNS"), "{list}");
    // the count sits under its header (right-aligned numbers)
    let end = header.find("PATTERNS").unwrap() + "PATTERNS".len();
    assert_eq!(&row[end - 1..end], "1", "{list}");

    let subs = ok(&with(&["subscriptions"]));
    assert!(subs.starts_with("PATTERN"), "{subs}");
    assert!(subs.lines().any(|l| l.starts_with("/e/*") && l.ends_with("1 (/e/)")), "{subs}");
    assert_eq!(ok(&with(&["subscriptions", "--prefix", "/nope/"])), "no subscriptions under /nope/\n");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&with(&["subscriptions", "--prefix", "/e", "-o", "json"]))).unwrap();
    assert_eq!(v["subscriptions"][0]["pattern"], "/e/*", "{v}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&with(&["subscriptions", "--service", "2", "-o", "json"]))).unwrap();
    assert_eq!(v["subscriptions"], serde_json::json!([]), "{v}");

    let out = ok(&with(&["services", "update", "1", "--queue-size", "2000000"]));
    assert_eq!(out, "updated service 1 (/e/): queue_size = 2000000\n");
    assert_eq!(core.get("/v1/services/1")["config"]["queue_size"], 2_000_000);
}

/// Every client command's --help: its own options before the admin API's,
/// and an example of its use.
#[test]
fn client_command_help_lists_its_own_options_first_and_an_example() {
    let cases: &[(&[&str], &str)] = &[
        (&["services", "add"], "--json"),
        (&["services", "list"], "--help"),
        (&["services", "show"], "--help"),
        (&["services", "remove"], "--help"),
        (&["services", "restart"], "--help"),
        (&["services", "update"], "--queue-size"),
        (&["subscriptions"], "--prefix"),
        (&["status"], "--help"),
        (&["nodes"], "--help"),
        (&["queues", "dead"], "--limit"),
        (&["resiliency"], "--help"),
        (&["resiliency", "show"], "--help"),
        (&["resiliency", "reset"], "--pattern"),
        (&["resiliency", "set"], "<FILE>"),
        (&["log-level"], "--help"),
    ];
    for (cmd, own) in cases {
        let help = ok(&cli(&[cmd, &["--help"][..]].concat(), &[]));
        let (own_at, admin_at) = (help.find(own).unwrap(), help.find("--admin <URL>").unwrap());
        assert!(own_at < admin_at, "{cmd:?}: {own} after --admin:\n{help}");
        assert!(help.contains("Admin API:"), "{cmd:?}: the admin options under their own heading:\n{help}");
        assert!(help.contains(&format!("Examples:\n  cumulo {}", cmd.join(" "))), "{cmd:?}: no example:\n{help}");
    }
    let help = ok(&cli(&["services", "update", "--help"], &[]));
    for opt in ["--count-process", "--queue-limit", "--queue-size <BYTES>", "--dest-refresh", "--restart-delay"] {
        assert!(help.find(opt).unwrap() < help.find("--admin").unwrap(), "{opt}:\n{help}");
    }
}
