//! The command line: help, and refused configs named by file, field and reason.

use cumulo_e2e::*;
use std::process::Output;

fn run(args: &[&str]) -> Output {
    cumulo_cmd().args(args).output().expect("run cumulo")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn help_mentions_run_and_check() {
    let o = run(&["--help"]);
    assert!(o.status.success());
    let t = text(&o);
    assert!(t.contains("run") && t.contains("check"), "{t}");
    let sub = text(&run(&["run", "--help"]));
    assert!(sub.contains("--config"), "{sub}");
    let o = run(&["frobnicate"]);
    assert!(!o.status.success(), "an unknown command must fail");
}

/// (what, config text, field expected in the message, reason expected)
const BAD: &[(&str, &str, &str, &str)] = &[
    ("small max_frame", "[core]\nmax_frame = 10\n", "core.max_frame", "at least 1024"),
    ("short keepalive", "[core]\nkeepalive = 5\n", "core.keepalive", "at least 100 ms"),
    ("bad prefix", "[[service]]\nprefix = \"nope\"\ninternal = \"echo\"\n", "service[0] (nope).prefix", "must start and end with '/'"),
    (
        "two wildcards in a prefix",
        "[[service]]\nprefix = \"/a/*?/\"\ninternal = \"echo\"\n",
        "service[0] (/a/*?/).prefix",
        "two wildcards",
    ),
    (
        "path and internal",
        "[[service]]\nprefix = \"/a/\"\npath = \"x\"\ninternal = \"echo\"\n",
        "service[0] (/a/).path",
        "not both",
    ),
    ("neither path nor internal", "[[service]]\nprefix = \"/a/\"\n", "service[0] (/a/).path", "give path"),
    ("unknown internal", "[[service]]\nprefix = \"/a/\"\ninternal = \"nope\"\n", "service[0] (/a/).internal", "unknown internal service 'nope'"),
    (
        "zero threads",
        "[[service]]\nprefix = \"/a/\"\ninternal = \"echo\"\n\n[[service]]\nprefix = \"/b/\"\npath = \"x\"\ncount_thread = 0\n",
        "service[1] (/b/).count_thread",
        "1 .. 1024",
    ),
    ("zero max_t", "[[service]]\nprefix = \"/a/\"\npath = \"x\"\nmax_t = 0\n", "service[0] (/a/).max_t", "at least 1 second"),
    ("window too big", "[[service]]\nprefix = \"/a/\"\npath = \"x\"\nmax_window = 5000\n", "service[0] (/a/).max_window", "1 .. 1024"),
    ("zero unmanaged timeout", "[core.unmanaged]\ntimeout_sync = 0\n", "core.unmanaged.timeout_sync", "at least 1 ms"),
    ("unknown key", "[core]\nsokcet = \"/tmp/x\"\n", "sokcet", "unknown field"),
    ("wrong type", "[core]\nmax_frame = \"big\"\n", "max_frame", "invalid type"),
    ("not TOML", "[core\n", "line 1", "invalid table header"),
];

#[test]
fn check_and_run_refuse_bad_configs_naming_file_field_and_reason() {
    let dir = TempDir::new();
    for (i, (what, body, field, reason)) in BAD.iter().enumerate() {
        let path = dir.0.join(format!("bad{i}.toml"));
        std::fs::write(&path, body).unwrap();
        let path = path.to_str().unwrap();
        for cmd in ["check", "run"] {
            let o = run(&[cmd, "--config", path]);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(1), "{cmd} of {what}: {t}");
            assert!(t.contains(path), "{cmd} of {what}: the file is not named: {t}");
            assert!(t.contains(field), "{cmd} of {what}: no field '{field}': {t}");
            assert!(t.contains(reason), "{cmd} of {what}: no reason '{reason}': {t}");
        }
    }
}

#[test]
fn a_missing_file_is_reported() {
    let o = run(&["check", "--config", "/nonexistent/cumulo.toml"]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(t.contains("/nonexistent/cumulo.toml") && t.contains("cannot read it"), "{t}");
}

#[test]
fn check_accepts_a_good_config() {
    let dir = TempDir::new();
    let path = dir.0.join("good.toml");
    let cfg = Config::new()
        .core("max_frame", 4096)
        .service(Service::internal("/e/", "echo"))
        .service(ts!("/t/").set("count_thread", 2));
    std::fs::write(&path, cfg.render("/tmp/unused.sock")).unwrap();
    let o = run(&["check", "--config", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("valid (2 services)"), "{}", text(&o));
}
