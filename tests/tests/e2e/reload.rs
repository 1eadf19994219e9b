//! Reload (docs/OPERATIONS.md, Reload): the edited config file applied to a
//! running core by SIGHUP and `cumulo reload`; `cumulo check --diff` says
//! what it would do; an invalid file or one that changes what needs a
//! restart changes nothing; services added through the admin API are kept;
//! a replaced service keeps answering.

use cumulo_e2e::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(admin: u16) -> Config {
    Config::new().admin("port", admin)
}

fn write(core: &Core, cfg: &Config) {
    std::fs::write(&core.config_path, cfg.render(&core.socket_str())).unwrap();
}

fn status_of(api: &mut Api, name: &str) -> Status {
    match api.send_sync(name, b"", b"x", opts(5000)) {
        Ok(_) => Status::Ok,
        Err(e) => e.status().unwrap_or_else(|| panic!("{name}: {e}")),
    }
}

/// Runs `cumulo` with the admin API of `port`; (exit ok, stdout + stderr).
fn cumulo(port: u16, args: &[&str]) -> (bool, String) {
    let out = cumulo_cmd().env("CUMULO_ADMIN", format!("http://127.0.0.1:{port}")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

fn processes(admin: u16, id: u32) -> usize {
    let v: serde_json::Value = serde_json::from_str(&admin_get(admin, &format!("/v1/services/{id}"))).unwrap();
    v["processes"].as_array().map_or(0, |p| p.len())
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(ms(50));
    }
}

#[test]
fn sighup_and_cumulo_reload_apply_the_edited_file_and_keep_what_the_api_added() {
    let admin = free_port();
    let first = config(admin)
        .service(Service::internal("/a/", "echo").probe("/a/x"))
        .service(ts!("/b/").set("count_thread", 1));
    let core = Core::start(first);
    let mut api = core.client();
    // A service added through the admin API, not in the file.
    core.admin_cmd(admin, &["services", "add", "--json", r#"{"prefix": "/rt/", "internal": "echo"}"#]);
    wait_for("/rt/ served", || status_of(&mut api, "/rt/x") == Status::Ok);

    // The edited file: /a/ goes, /b/ runs 2 processes (a live option), /c/
    // comes.
    let second = config(admin)
        .service(ts!("/b/").set("count_thread", 1).set("count_process", 2))
        .service(Service::internal("/c/", "echo"));
    write(&core, &second);
    let (ok, plan) = cumulo(admin, &["check", "--config", core.config_path.to_str().unwrap(), "--diff"]);
    assert!(ok, "{plan}");
    assert!(plan.contains("+ add /c/ (internal echo)"), "{plan}");
    assert!(plan.contains("- remove /a/ [1] (internal echo)"), "{plan}");
    assert!(plan.contains("~ update /b/ [2]") && plan.contains("count_process 1 -> 2"), "{plan}");
    assert!(plan.contains("= keep /rt/ [3]"), "{plan}");
    // A dry run changes nothing.
    assert_eq!(status_of(&mut api, "/a/x"), Status::Ok);
    assert_eq!(status_of(&mut api, "/c/x"), Status::NoService);

    core.signal(libc::SIGHUP);
    core.wait_lines(&["reload of", "added 1 (/c/)", "removed 1 (/a/)", "updated 1 (/b/)"], 1, Duration::from_secs(20));
    wait_for("/c/ served", || status_of(&mut api, "/c/x") == Status::Ok);
    assert_eq!(status_of(&mut api, "/a/x"), Status::NoService);
    assert_eq!(status_of(&mut api, "/rt/x"), Status::Ok, "kept");
    assert_eq!(processes(admin, 2), 2);

    // The same file again: nothing to change.
    let (ok, out) = cumulo(admin, &["reload"]);
    assert!(ok && out.contains("nothing to change") && out.contains("2 unchanged"), "{out}");

    // An invalid file, and one that changes [core]: refused, nothing changed.
    std::fs::write(&core.config_path, "[[service]]\nprefix = \"/d/\"\ninternal = \"no-such-service\"\n").unwrap();
    let (ok, out) = cumulo(admin, &["reload"]);
    assert!(!ok && out.contains("nothing changed"), "{out}");
    write(&core, &second.clone().core("max_frame", 2_000_000));
    let (ok, out) = cumulo(admin, &["reload"]);
    assert!(!ok && out.contains("core.max_frame changed") && out.contains("needs a restart"), "{out}");
    // [tracing] too: the exporter and the shards' recorders are made at start.
    write(&core, &second.clone().table("[tracing]\nsample_ratio = 0.5"));
    let (ok, out) = cumulo(admin, &["reload"]);
    assert!(!ok && out.contains("tracing changed") && out.contains("needs a restart"), "{out}");
    assert_eq!(status_of(&mut api, "/c/x"), Status::Ok);
    assert_eq!(status_of(&mut api, "/b/x"), Status::Ok);
    assert!(!core.lines_with(&["reload refused"]).is_empty());
}

#[test]
fn a_replaced_service_keeps_answering_while_it_is_replaced() {
    let admin = free_port();
    let first = config(admin).service(ts!("/r/").set("count_thread", 1).env("TS_TAG", "old"));
    let core = Core::start(first.clone());
    let socket = core.socket_str();
    let (stop, sent, failed) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let caller = {
        let (stop, sent, failed) = (stop.clone(), sent.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut api = Api::connect(Options::unmanaged(socket, "/caller/")).unwrap();
            let mut tags = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                sent.fetch_add(1, Ordering::Relaxed);
                match api.send_sync("/r/x", b"", b"x", opts(10_000)) {
                    Ok(r) => {
                        tags.insert(field(&r, "tag"));
                    }
                    Err(e) => {
                        eprintln!("while replacing: {e}");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            tags
        })
    };
    std::thread::sleep(ms(200));
    // env is not a live option: the service is replaced.
    write(&core, &config(admin).service(ts!("/r/").set("count_thread", 1).env("TS_TAG", "new")));
    let (ok, out) = cumulo(admin, &["reload"]);
    assert!(ok && out.contains("* replace /r/ [1]") && out.contains("env"), "{out}");
    let mut api = core.client();
    wait_for("the new process answers", || {
        api.send_sync("/r/x", b"", b"", opts(5000)).map(|r| field(&r, "tag") == "new").unwrap_or(false)
    });
    std::thread::sleep(ms(200));
    stop.store(true, Ordering::Relaxed);
    let tags = caller.join().unwrap();
    assert_eq!(failed.load(Ordering::Relaxed), 0, "of {} requests", sent.load(Ordering::Relaxed));
    assert!(tags.contains("old") && tags.contains("new"), "{tags:?}");
}
