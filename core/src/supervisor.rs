//! The process supervisor: starts each external service's `count_process`
//! processes, tells them through their environment how to connect, logs their
//! output, restarts them within `max_r` restarts per `max_t` seconds, and
//! stops them gracefully (TERMINATE, then SIGTERM, then SIGKILL).

use crate::config::{Config, ServiceConfig};
use crate::internal::{self, InternalApi};
use crate::state::{ProcessSlot, Shared};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Time between SIGTERM and SIGKILL when a process ignores SIGTERM.
const KILL_GRACE: Duration = Duration::from_secs(2);

pub struct Supervisor {
    core: Shared,
    cfg: Rc<Config>,
    socket_env: String,
    /// Restart times per service, to apply max_r / max_t.
    restarts: RefCell<Vec<VecDeque<Instant>>>,
    pub stopping: CancellationToken,
    running: Rc<RefCell<usize>>,
    all_stopped: Rc<Notify>,
}

impl Supervisor {
    pub fn new(core: Shared, cfg: Rc<Config>, socket_env: String) -> Rc<Supervisor> {
        let n = cfg.services.len();
        Rc::new(Supervisor {
            core,
            cfg,
            socket_env,
            restarts: RefCell::new(vec![VecDeque::new(); n]),
            stopping: CancellationToken::new(),
            running: Rc::new(RefCell::new(0)),
            all_stopped: Rc::new(Notify::new()),
        })
    }

    /// Starts every configured service. Internal services that cannot be
    /// created are an error here (the config was validated already).
    pub fn start_all(self: &Rc<Self>) -> anyhow::Result<()> {
        for (i, svc) in self.cfg.services.iter().enumerate() {
            if let Some(name) = &svc.internal {
                self.start_internal(svc, name)?;
            } else {
                for p in 0..svc.count_process {
                    *self.running.borrow_mut() += 1;
                    let me = self.clone();
                    tokio::task::spawn_local(async move {
                        me.clone().process_loop(i, p).await;
                        me.process_done();
                    });
                }
            }
            tracing::info!(service = %svc.prefix, "service added: {}", describe(svc));
        }
        Ok(())
    }

    fn process_done(&self) {
        let mut n = self.running.borrow_mut();
        *n -= 1;
        if *n == 0 {
            self.all_stopped.notify_one();
        }
    }

    fn start_internal(&self, svc: &ServiceConfig, name: &str) -> anyhow::Result<()> {
        let options = Rc::new(svc.options());
        for p in 0..svc.count_process {
            for _t in 0..svc.count_thread {
                let service = internal::create(name, &svc.settings).map_err(anyhow::Error::msg)?;
                let api = InternalApi::connect(&self.core, &svc.prefix, options.clone(), p, svc.count_process, svc.count_thread)
                    .map_err(|(_, m)| anyhow::anyhow!(m))?;
                let stop = self.stopping.clone();
                tokio::task::spawn_local(async move {
                    tokio::select! {
                        _ = service.run(api) => {}
                        _ = stop.cancelled() => {}
                    }
                });
            }
        }
        Ok(())
    }

    /// Runs one process slot: start, wait, restart, until stopped or given up.
    async fn process_loop(self: Rc<Self>, service: usize, index: u32) {
        let svc = &self.cfg.services[service];
        let options = Rc::new(svc.options());
        loop {
            if self.stopping.is_cancelled() {
                return;
            }
            let token: Rc<str> = Rc::from(new_token());
            let ready = Rc::new(Notify::new());
            self.core.borrow_mut().processes.insert(
                token.clone(),
                ProcessSlot {
                    service,
                    prefix: Rc::from(svc.prefix.as_str()),
                    process_index: index,
                    process_count: svc.count_process,
                    thread_count: svc.count_thread,
                    options: options.clone(),
                    threads: vec![None; svc.count_thread as usize],
                    ready: ready.clone(),
                    pid: None,
                },
            );
            let started = Instant::now();
            let outcome = match self.spawn(svc, index, &token) {
                Ok(child) => self.watch(svc, index, &token, child, ready).await,
                Err(e) => {
                    tracing::error!(service = %svc.prefix, process = index, "cannot start {}: {e}", svc.path.as_deref().unwrap_or("?"));
                    Outcome::Exited(None)
                }
            };
            self.core.borrow_mut().processes.remove(&token);
            if matches!(outcome, Outcome::Stopped) || self.stopping.is_cancelled() {
                return;
            }
            if !self.may_restart(service, started) {
                tracing::error!(
                    service = %svc.prefix, process = index,
                    "giving up: more than {} restarts within {} s (max_r / max_t); process {index} stays down",
                    svc.max_r, svc.max_t
                );
                return;
            }
            tracing::info!(service = %svc.prefix, process = index, "restarting process {index}");
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(svc.restart_delay as u64)) => {}
                _ = self.stopping.cancelled() => return,
            }
        }
    }

    fn may_restart(&self, service: usize, _started: Instant) -> bool {
        let svc = &self.cfg.services[service];
        let mut all = self.restarts.borrow_mut();
        let times = &mut all[service];
        let now = Instant::now();
        let window = Duration::from_secs(svc.max_t as u64);
        while times.front().is_some_and(|t| now.duration_since(*t) > window) {
            times.pop_front();
        }
        if times.len() as u32 >= svc.max_r {
            return false;
        }
        times.push_back(now);
        true
    }

    fn spawn(&self, svc: &ServiceConfig, index: u32, token: &str) -> std::io::Result<Child> {
        let path = svc.path.as_deref().unwrap_or_default();
        let program: PathBuf = if path.contains('/') && !path.starts_with('/') {
            self.cfg.base_dir.join(path)
        } else {
            PathBuf::from(path)
        };
        let dir = match &svc.dir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => self.cfg.base_dir.join(d),
            None => self.cfg.base_dir.clone(),
        };
        let mut cmd = Command::new(&program);
        cmd.args(&svc.args)
            .current_dir(dir)
            .envs(&svc.env)
            .env("CUMULO_SOCKET", &self.socket_env)
            .env("CUMULO_TOKEN", token)
            .env("CUMULO_PROCESS_INDEX", index.to_string())
            .env("CUMULO_PROCESS_COUNT", svc.count_process.to_string())
            .env("CUMULO_THREAD_COUNT", svc.count_thread.to_string())
            .env("CUMULO_PREFIX", &svc.prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::os::die_with_parent(&mut cmd);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        if let Some(slot) = self.core.borrow_mut().processes.get_mut(token) {
            slot.pid = pid;
        }
        tracing::info!(service = %svc.prefix, process = index, "process {index} started (pid {})", pid.unwrap_or(0));
        let prefix: Rc<str> = Rc::from(svc.prefix.as_str());
        if let Some(out) = child.stdout.take() {
            tokio::task::spawn_local(log_lines(out, prefix.clone(), index, false));
        }
        if let Some(err) = child.stderr.take() {
            tokio::task::spawn_local(log_lines(err, prefix, index, true));
        }
        Ok(child)
    }

    /// Waits for a process: its init (every thread connected within
    /// timeout_init), its exit, or the core stopping.
    async fn watch(&self, svc: &ServiceConfig, index: u32, token: &str, mut child: Child, ready: Rc<Notify>) -> Outcome {
        let init = Duration::from_millis(svc.timeout_init as u64);
        tokio::select! {
            _ = ready.notified() => {}
            _ = tokio::time::sleep(init) => {
                let connected = self.core.borrow().processes.get(token)
                    .map_or(0, |s| s.threads.iter().filter(|t| t.is_some()).count());
                tracing::error!(service = %svc.prefix, process = index,
                    "init failed: {connected} of {} threads connected within timeout_init ({} ms); killing it",
                    svc.count_thread, svc.timeout_init);
                let _ = child.start_kill();
                let status = child.wait().await.ok();
                log_exit(svc, index, status);
                return Outcome::Exited(status);
            }
            status = child.wait() => {
                let status = status.ok();
                tracing::error!(service = %svc.prefix, process = index, "init failed: the process exited before connecting");
                log_exit(svc, index, status);
                return Outcome::Exited(status);
            }
            _ = self.stopping.cancelled() => return self.terminate(svc, index, child).await,
        }
        tracing::debug!(service = %svc.prefix, process = index, "process {index} initialized");
        tokio::select! {
            status = child.wait() => {
                let status = status.ok();
                log_exit(svc, index, status);
                Outcome::Exited(status)
            }
            _ = self.stopping.cancelled() => self.terminate(svc, index, child).await,
        }
    }

    /// The core is stopping: the instances already got TERMINATE; give the
    /// process timeout_terminate to exit, then SIGTERM, then SIGKILL.
    async fn terminate(&self, svc: &ServiceConfig, index: u32, mut child: Child) -> Outcome {
        let grace = Duration::from_millis(svc.timeout_terminate as u64);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        if let Some(pid) = child.id() {
            tracing::warn!(service = %svc.prefix, process = index, "still running {} ms after TERMINATE: SIGTERM", svc.timeout_terminate);
            crate::os::signal(pid, libc::SIGTERM);
        }
        if let Ok(status) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        tracing::warn!(service = %svc.prefix, process = index, "ignored SIGTERM: SIGKILL");
        let _ = child.start_kill();
        log_exit(svc, index, child.wait().await.ok());
        Outcome::Stopped
    }

    /// Stops every process and internal service; returns when all are gone.
    pub async fn stop_all(&self) {
        self.stopping.cancel();
        if *self.running.borrow() > 0 {
            self.all_stopped.notified().await;
        }
    }

    /// Kills processes found hung by the keep-alive check.
    pub fn kill_hung(&self, pids: &[u32]) {
        for &pid in pids {
            crate::os::signal(pid, libc::SIGKILL);
        }
    }
}

enum Outcome {
    Exited(#[allow(dead_code)] Option<ExitStatus>),
    Stopped,
}

fn describe(svc: &ServiceConfig) -> String {
    match (&svc.internal, &svc.path) {
        (Some(name), _) => format!("internal {name}, {} x {} instances", svc.count_process, svc.count_thread),
        (_, Some(path)) => format!("{path} {}, {} processes x {} threads", svc.args.join(" "), svc.count_process, svc.count_thread),
        _ => String::new(),
    }
}

fn log_exit(svc: &ServiceConfig, index: u32, status: Option<ExitStatus>) {
    use std::os::unix::process::ExitStatusExt;
    let how = match status {
        Some(s) if s.code() == Some(0) => "exited with code 0".to_string(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exited with code {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        None => "exited (status unknown)".to_string(),
    };
    if status.is_some_and(|s| s.success()) {
        tracing::info!(service = %svc.prefix, process = index, "process {index} {how}");
    } else {
        tracing::warn!(service = %svc.prefix, process = index, "process {index} {how}");
    }
}

async fn log_lines<R: tokio::io::AsyncRead + Unpin>(r: R, prefix: Rc<str>, index: u32, stderr: bool) {
    let mut lines = BufReader::new(r).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if stderr {
            tracing::warn!(target: "service", service = %prefix, process = index, "{line}");
        } else {
            tracing::info!(target: "service", service = %prefix, process = index, "{line}");
        }
    }
}

/// A token a process presents in HELLO: 128 random bits, so a process cannot
/// guess another's.
fn new_token() -> String {
    let mut b = [0u8; 16];
    crate::os::random_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
