//! A real `cumulo run` process with its own config, socket and log.
#![allow(unsafe_code, reason = "signals and rlimits for test processes through libc; a SAFETY comment on every block")]

use crate::config::Config;
use cumulo::{Api, Options, SendOptions};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a core and its services get to come up on a busy machine.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The `cumulo` binary: `CUMULO_BIN`, else the workspace's release build,
/// else its debug build.
pub fn cumulo_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CUMULO_BIN") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "CUMULO_BIN={} is not a file", p.display());
        return p;
    }
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let target = match std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        Some(t) if t.is_absolute() => t,
        Some(t) => ws.join(t),
        None => ws.join("target"),
    };
    for profile in ["release", "debug"] {
        let p = target.join(profile).join("cumulo");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "the cumulo binary is not built (looked in {}/release and /debug): run `cargo build --release -p cumulo` \
         first, or set CUMULO_BIN",
        target.display()
    );
}

/// A TCP port free on loopback at the time of the call (for an admin API).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// `cumulo` with plain-text logs, for CLI tests.
pub fn cumulo_cmd() -> Command {
    let mut c = Command::new(cumulo_bin());
    c.env("NO_COLOR", "1").env("CUMULO_LOG", "info");
    c
}

/// A fresh private folder, removed on drop. Kept short: a Unix socket path
/// must fit in 108 bytes.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        let base = if base.as_os_str().len() > 60 { PathBuf::from("/tmp") } else { base };
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("cumulo-e2e-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub struct Core {
    pub dir: TempDir,
    pub socket: PathBuf,
    pub config_path: PathBuf,
    pub log_path: PathBuf,
    pub pid: u32,
    child: Option<Child>,
    exit: Option<ExitStatus>,
}

impl Core {
    /// Starts a core and waits until it accepts connections and every
    /// service that should come up has subscribed.
    pub fn start(cfg: Config) -> Core {
        let core = Core::spawn(&cfg);
        let ready: u32 = cfg.services.iter().map(|s| s.expected_ready()).sum();
        if ready > 0 {
            core.wait_ready(ready);
        }
        for name in cfg.services.iter().flat_map(|s| s.probes.iter()) {
            core.wait_service(name);
        }
        core
    }

    /// Starts a core and waits only for its socket.
    pub fn spawn(cfg: &Config) -> Core {
        let dir = TempDir::new();
        let socket = dir.0.join("core.sock");
        let config_path = dir.0.join("cumulo.toml");
        let log_path = dir.0.join("core.log");
        std::fs::write(&config_path, cfg.render(socket.to_str().unwrap())).unwrap();
        let log = File::create(&log_path).unwrap();
        let mut cmd = cumulo_cmd();
        if let Some(n) = cfg.open_files {
            use std::os::unix::process::CommandExt;
            // SAFETY: setrlimit is async-signal-safe; nothing else runs
            // between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: n, rlim_max: n };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd
            .arg("run")
            .arg("--config")
            .arg(&config_path)
            .current_dir(&dir.0)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", cumulo_bin().display()));
        let pid = child.id();
        let mut core = Core { dir, socket, config_path, log_path, pid, child: Some(child), exit: None };
        core.wait_socket();
        core
    }

    fn wait_socket(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return;
            }
            if let Some(st) = self.try_wait() {
                panic!("the core exited at start ({st}); its log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the core did not listen within {START_TIMEOUT:?}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn socket_str(&self) -> String {
        self.socket.to_str().unwrap().to_string()
    }

    /// An unmanaged client under the prefix `/client/`.
    pub fn client(&self) -> Api {
        self.client_with_prefix("/client/")
    }

    pub fn client_with_prefix(&self, prefix: &str) -> Api {
        Api::connect(Options::unmanaged(self.socket_str(), prefix))
            .unwrap_or_else(|e| panic!("cannot connect a client: {e}; log:\n{}", self.log()))
    }

    /// Waits until `name` answers a request sent with WAIT_FOR_SERVICE.
    pub fn wait_service(&self, name: &str) {
        let mut api = self.client_with_prefix("/probe/");
        let o = SendOptions { timeout: START_TIMEOUT.as_millis() as u32, wait_for_service: true, ..Default::default() };
        if let Err(e) = api.send_sync(name, b"", b"probe", o) {
            panic!("{name} did not answer at start: {e}; log:\n{}", self.log());
        }
    }

    /// The core's log so far (its stderr, with its services' output).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Log lines containing every one of `needles`.
    pub fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        self.log().lines().filter(|l| needles.iter().all(|n| l.contains(n))).map(String::from).collect()
    }

    /// Waits until at least `n` log lines contain every one of `needles`.
    pub fn wait_lines(&self, needles: &[&str], n: usize, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.lines_with(needles);
            if found.len() >= n {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "expected {n} log lines with {needles:?} within {timeout:?}, found {}; log:\n{}",
                found.len(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits until `n` test_service instances have subscribed (in total,
    /// counting restarts).
    pub fn wait_ready(&self, n: u32) {
        self.wait_lines(&["ts-ready"], n as usize, START_TIMEOUT);
    }

    /// pids of the service processes the core started, in start order.
    pub fn service_pids(&self) -> Vec<u32> {
        self.lines_with(&["started (pid "])
            .iter()
            .filter_map(|l| l.split("started (pid ").nth(1)?.split(')').next()?.parse().ok())
            .collect()
    }

    /// pids of the core's living child processes (its services), read from
    /// /proc: every thread's `children` list, since any of the core's
    /// threads may have spawned one.
    pub fn child_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else { return pids };
        for t in tasks.flatten() {
            let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            pids.extend(list.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Runs a `cumulo` client command against this core's admin API at
    /// `port`; panics with its output if it fails.
    pub fn admin_cmd(&self, port: u16, args: &[&str]) -> String {
        let out = cumulo_cmd()
            .env("CUMULO_ADMIN", format!("http://127.0.0.1:{port}"))
            .args(args)
            .output()
            .expect("run cumulo");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "cumulo {args:?} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
        text
    }

    pub fn signal(&self, sig: i32) {
        if self.exit.is_none() {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped.
            unsafe {
                libc::kill(self.pid as i32, sig);
            }
        }
    }

    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            if let Some(c) = self.child.as_mut() {
                self.exit = c.try_wait().ok().flatten();
            }
        }
        self.exit
    }

    /// Waits for the core to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(s) = self.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.signal(libc::SIGTERM);
        if self.wait_exit(Duration::from_millis(1500)).is_none() {
            self.signal(libc::SIGKILL);
            self.wait_exit(Duration::from_secs(5));
        }
        if std::thread::panicking() {
            eprintln!("---- core log ({}) ----\n{}", self.log_path.display(), self.log());
        }
    }
}

/// The body of `GET path` on an admin API at `port` (no token).
pub fn admin_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let end = text.find("\r\n\r\n").expect("a response head");
    text[end + 4..].to_string()
}
