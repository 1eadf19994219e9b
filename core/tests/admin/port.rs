//! The admin port at start: one the config sets that is in use stops the
//! start (non-zero exit, the address and the key named, no service
//! started); the default one in use only turns the admin API off, with a
//! warning, and the core serves.

use crate::common::*;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A fresh folder for one test's core.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cumulo-e2e-port-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A config with an `echo` service and an external one that leaves a file
/// behind when it starts (`started`), and these `[admin]` lines.
fn config(dir: &Path, admin: &str) -> PathBuf {
    let text = format!(
        "[core]\nsocket = \"{}\"\nthreads = {}\n\n[admin]\n{admin}\n\n\
         [[service]]\nprefix = \"/echo/\"\ninternal = \"echo\"\n\n\
         [[service]]\nprefix = \"/marker/\"\npath = \"/bin/sh\"\nargs = [\"-c\", \"touch started; sleep 30\"]\n",
        dir.join("cumulo.sock").display(),
        test_threads(),
    );
    let path = dir.join("cumulo.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits for `child` to exit, at most `limit`; kills it and panics with the
/// log past that.
fn wait_exit(child: &mut Child, limit: Duration, why: &str, log: &Path) -> ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{why} within {limit:?}; log:\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(config: &Path, dir: &Path) -> Child {
    Command::new(CUMULO)
        .args(["run", "--config"])
        .arg(config)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("CUMULO_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("core.log")).unwrap())
        .spawn()
        .expect("start cumulo")
}

#[test]
fn an_admin_port_set_in_the_config_and_in_use_stops_the_start() {
    let dir = fresh_dir("set");
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let config = config(&dir, &format!("port = {port}"));
    let mut child = run(&config, &dir);
    let why = format!("the core did not stop although admin.port {port} is in use");
    let status = wait_exit(&mut child, Duration::from_secs(15), &why, &dir.join("core.log"));
    let log = std::fs::read_to_string(dir.join("core.log")).unwrap();
    assert_eq!(status.code(), Some(1), "exit status {status}; log:\n{log}");
    let wanted = format!("cannot listen for the admin API on 127.0.0.1:{port} (admin.port = {port} in the config)");
    assert!(log.contains(&wanted), "the error names the address and the key: {wanted:?} not in\n{log}");
    assert!(log.contains("ERROR"), "logged as an error:\n{log}");
    assert!(!log.contains(" ready: "), "the core said it was ready:\n{log}");
    // Stopped before any service started, and before it listened for instances.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!dir.join("started").exists(), "a service was started before the admin port was bound; log:\n{log}");
    assert!(std::os::unix::net::UnixStream::connect(dir.join("cumulo.sock")).is_err(), "the socket is served");
    drop(held);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_default_admin_port_in_use_only_turns_the_admin_api_off() {
    let dir = fresh_dir("default");
    // The default port (7311), held here on a loopback address of this
    // test's own, so that no other core's admin API (127.0.0.1:7311) can
    // come or go under it.
    let (held, ip) = (2..=40)
        .find_map(|last| {
            let ip = format!("127.0.0.{last}");
            TcpListener::bind((ip.as_str(), cumulo_config::DEFAULT_ADMIN_PORT)).ok().map(|l| (l, ip))
        })
        .expect("no loopback address with port 7311 free");
    let config = config(&dir, &format!("address = \"{ip}\""));
    let mut child = run(&config, &dir);
    let log_path = dir.join("core.log");
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let end = Instant::now() + Duration::from_secs(15);
    while !log().contains(" ready: ") {
        if let Some(s) = child.try_wait().unwrap() {
            panic!("the core stopped ({s}) although only the default admin port was in use; log:\n{}", log());
        }
        assert!(Instant::now() < end, "the core did not start; log:\n{}", log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = log();
    let warning = text
        .lines()
        .find(|l| l.contains("admin API off"))
        .unwrap_or_else(|| panic!("no warning that the admin API is off:\n{text}"));
    assert!(warning.contains("WARN"), "a warning: {warning}");
    assert!(warning.contains(&format!("cannot listen for the admin API on {ip}:7311, the default port")), "{warning}");
    // It serves its services and instances.
    let mut api =
        cumulo::Api::connect(cumulo::Options::unmanaged(dir.join("cumulo.sock").display().to_string(), "/c/"))
            .expect("connect to the core");
    let o = cumulo::SendOptions { timeout: 5000, wait_for_service: true, ..Default::default() };
    let r = api.send_sync("/echo/x", b"", b"still serving", o).expect("echo answers");
    assert_eq!(r.body, b"still serving");
    let end = Instant::now() + Duration::from_secs(10);
    while !dir.join("started").exists() {
        assert!(Instant::now() < end, "the external service was not started; log:\n{}", log());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(api);
    let ok = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
    let status = wait_exit(&mut child, Duration::from_secs(15), "the core did not stop on SIGTERM", &log_path);
    assert!(status.success(), "exit status {status}; log:\n{}", log());
    drop(held);
    std::fs::remove_dir_all(&dir).unwrap();
}
