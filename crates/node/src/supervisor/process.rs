//! External services' processes: spawning one with the environment that
//! tells it how to connect, waiting for its init, its exit or a stop,
//! stopping it gracefully (TERMINATE, then SIGTERM, then SIGKILL), logging
//! its output and how it ended.

use super::output::{log_output, Source};
use super::{ProcState, Service, Slot, StopReason, Supervisor};
use cumulo_config::{Protocol, ServiceConfig};
use cumulo_router::bump;
use cumulo_router::ProcessSlot;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::rc::Rc;
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// Time between SIGTERM and SIGKILL when a process ignores SIGTERM.
pub(super) const KILL_GRACE: Duration = Duration::from_secs(2);

impl Supervisor {
    /// Runs one process slot: start, wait, restart, until stopped.
    pub(super) async fn process_loop(&self, svc: &Rc<Service>, slot: &Rc<Slot>) {
        let index = slot.index;
        loop {
            if slot.stop.is_cancelled() {
                return;
            }
            let cfg = svc.config().clone();
            let token: Rc<str> = Rc::from(new_token());
            let ready = Rc::new(Notify::new());
            self.core.borrow_mut().add_process(
                token.clone(),
                ProcessSlot {
                    service: svc.id,
                    prefix: svc.prefix.clone(),
                    process_index: index,
                    process_count: cfg.count_process,
                    thread_count: cfg.count_thread,
                    options: svc.options.borrow().clone(),
                    metrics: svc.metrics.clone(),
                    retiring: false,
                    threads: vec![None; cfg.count_thread as usize],
                    shards: vec![0; cfg.count_thread as usize],
                    ready: ready.clone(),
                    pid: None,
                },
            );
            *slot.token.borrow_mut() = Some(token.clone());
            slot.set(ProcState::Starting, true);
            let outcome = match self.spawn(svc, &cfg, index, &token) {
                Ok(child) => {
                    slot.pid.set(child.id());
                    self.watch(svc, slot, &cfg, &token, child, ready).await
                }
                Err(e) => {
                    tracing::error!(service = %svc.prefix, service_id = svc.id, process = index,
                        "cannot start {}: {e}", cfg.path.as_deref().unwrap_or("?"));
                    Outcome::Exited
                }
            };
            self.core.borrow_mut().remove_process(&token);
            *slot.token.borrow_mut() = None;
            slot.pid.set(None);
            match outcome {
                Outcome::Stopped => return,
                Outcome::Restart => continue,
                Outcome::Exited if slot.stop.is_cancelled() => return,
                Outcome::Exited => {}
            }
            if !svc.may_restart() {
                tracing::error!(
                    service = %svc.prefix, service_id = svc.id, process = index,
                    "giving up: more than {} restarts within {} s (max_r / max_t); process {index} stays down until restarted",
                    cfg.max_r, cfg.max_t
                );
                slot.set(ProcState::Failed, false);
                tokio::select! {
                    _ = slot.restart.notified() => continue,
                    _ = slot.stop.cancelled() => return,
                }
            }
            slot.restarts.set(slot.restarts.get() + 1);
            bump(&svc.metrics.restarts);
            tracing::info!(service = %svc.prefix, service_id = svc.id, process = index,
                "restarting process {index} in {} ms (restart {} of {} allowed within {} s)",
                cfg.restart_delay, svc.restart_times.borrow().len(), cfg.max_r, cfg.max_t);
            slot.set(ProcState::Restarting, false);
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(cfg.restart_delay as u64)) => {}
                _ = slot.restart.notified() => {}
                _ = slot.stop.cancelled() => return,
            }
        }
    }

    pub(super) fn spawn(&self, svc: &Service, cfg: &ServiceConfig, index: u32, token: &str) -> std::io::Result<Child> {
        let path = cfg.path.as_deref().unwrap_or_default();
        let program: PathBuf =
            if path.contains('/') && !path.starts_with('/') { self.base_dir.join(path) } else { PathBuf::from(path) };
        let dir = match &cfg.dir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => self.base_dir.join(d),
            None => self.base_dir.clone(),
        };
        let mut cmd = Command::new(&program);
        cmd.args(&cfg.args).current_dir(dir).envs(&cfg.env);
        // CloudI-protocol processes get one socket per thread as descriptor
        // 3 + thread index; the core keeps the other ends.
        let mut cloudi_sockets = Vec::new();
        let mut child_fds = Vec::new();
        match cfg.protocol {
            Protocol::Cumulo => {
                cmd.env("CUMULO_SOCKET", &self.socket_env)
                    .env("CUMULO_TOKEN", token)
                    .env("CUMULO_PROCESS_INDEX", index.to_string())
                    .env("CUMULO_PROCESS_COUNT", cfg.count_process.to_string())
                    .env("CUMULO_THREAD_COUNT", cfg.count_thread.to_string())
                    .env("CUMULO_PREFIX", &cfg.prefix);
            }
            Protocol::Cloudi => {
                let mut theirs = Vec::new();
                for _ in 0..cfg.count_thread {
                    let (ours, their) = std::os::unix::net::UnixStream::pair()?;
                    cloudi_sockets.push(ours);
                    theirs.push(std::os::fd::OwnedFd::from(their));
                }
                cumulo_sys::pass_fds(&mut cmd, &theirs);
                cmd.env("CLOUDI_API_INIT_PROTOCOL", "local")
                    .env("CLOUDI_API_INIT_BUFFER_SIZE", crate::cloudi::BUFFER_SIZE.to_string())
                    .env("CLOUDI_API_INIT_THREAD_COUNT", cfg.count_thread.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_INDEX", index.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_COUNT_MAX", cfg.count_process.to_string())
                    .env("CLOUDI_API_INIT_PROCESS_COUNT_MIN", cfg.count_process.to_string())
                    .env("CLOUDI_API_INIT_TIMEOUT_INITIALIZE", cfg.timeout_init.to_string())
                    .env("CLOUDI_API_INIT_TIMEOUT_TERMINATE", cfg.timeout_terminate.to_string());
                // Open until the spawn below has run the pre_exec hook.
                child_fds = theirs;
            }
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
        cumulo_sys::die_with_parent(&mut cmd);
        let mut child = cmd.spawn()?;
        drop(child_fds); // the child's ends of CloudI socket pairs, in the core
        for (thread_index, sock) in cloudi_sockets.into_iter().enumerate() {
            sock.set_nonblocking(true)?;
            let stream = tokio::net::UnixStream::from_std(sock)?;
            let task = crate::cloudi::connection::run(
                self.core.clone(),
                stream,
                Rc::from(token),
                thread_index as u32,
                svc.prefix.clone(),
            );
            tokio::task::spawn_local(task);
        }
        let pid = child.id();
        if let Some(slot) = self.core.borrow_mut().process_mut(token) {
            slot.pid = pid;
        }
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} started (pid {})", pid.unwrap_or(0));
        let source = || Source { prefix: svc.prefix.clone(), service_id: svc.id, index };
        if let Some(out) = child.stdout.take() {
            tokio::task::spawn_local(log_output(out, source(), false));
        }
        if let Some(err) = child.stderr.take() {
            tokio::task::spawn_local(log_output(err, source(), true));
        }
        Ok(child)
    }

    /// Waits for a process: its init (every thread connected within
    /// timeout_init), then its exit, a stop or a restart request.
    pub(super) async fn watch(
        &self,
        svc: &Service,
        slot: &Slot,
        cfg: &ServiceConfig,
        token: &str,
        mut child: Child,
        ready: Rc<Notify>,
    ) -> Outcome {
        let index = slot.index;
        let init = Duration::from_millis(cfg.timeout_init as u64);
        tokio::select! {
            _ = ready.notified() => {}
            _ = tokio::time::sleep(init) => {
                let connected = self.core.borrow().process(token)
                    .map_or(0, |s| s.threads.iter().filter(|t| t.is_some()).count());
                tracing::error!(service = %svc.prefix, service_id = svc.id, process = index,
                    "init failed: {connected} of {} threads connected within timeout_init ({} ms); killing it",
                    cfg.count_thread, cfg.timeout_init);
                let _ = child.start_kill();
                let status = child.wait().await.ok();
                log_exit(svc, index, status);
                return Outcome::Exited;
            }
            status = child.wait() => {
                let status = status.ok();
                tracing::error!(service = %svc.prefix, service_id = svc.id, process = index, "init failed: the process exited before connecting");
                log_exit(svc, index, status);
                return Outcome::Exited;
            }
            _ = slot.stop.cancelled() => return self.terminate(svc, slot, token, child, slot.stop_reason.get()).await,
            _ = slot.restart.notified() => {
                self.terminate(svc, slot, token, child, StopReason::RestartRequested).await;
                return Outcome::Restart;
            }
        }
        tracing::debug!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} initialized");
        slot.set(ProcState::Running, false);
        tokio::select! {
            status = child.wait() => {
                log_exit(svc, index, status.ok());
                Outcome::Exited
            }
            _ = slot.stop.cancelled() => self.terminate(svc, slot, token, child, slot.stop_reason.get()).await,
            _ = slot.restart.notified() => {
                self.terminate(svc, slot, token, child, StopReason::RestartRequested).await;
                Outcome::Restart
            }
        }
    }

    /// Stops a process gracefully: its instances stop getting requests and
    /// get TERMINATE (on a core shutdown they already have); it has
    /// timeout_terminate to finish what it holds and exit, then SIGTERM,
    /// then SIGKILL.
    pub(super) async fn terminate(
        &self,
        svc: &Service,
        slot: &Slot,
        token: &str,
        mut child: Child,
        why: StopReason,
    ) -> Outcome {
        let index = slot.index;
        slot.set(ProcState::Stopping, false);
        let terminate_ms = svc.options.borrow().timeout_terminate;
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "stopping process {index} ({why}): TERMINATE, {terminate_ms} ms to finish");
        let lost =
            format!("process {index} of service {} ({}) stopped before handling the request", svc.id, svc.prefix);
        self.core.borrow_mut().retire_process(token, terminate_ms, &lost);
        let grace = Duration::from_millis(terminate_ms as u64);
        if let Ok(status) = tokio::time::timeout(grace, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        if let Some(pid) = child.id() {
            tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "still running {terminate_ms} ms after TERMINATE: SIGTERM");
            cumulo_sys::signal(pid, libc::SIGTERM);
        }
        if let Ok(status) = tokio::time::timeout(KILL_GRACE, child.wait()).await {
            log_exit(svc, index, status.ok());
            return Outcome::Stopped;
        }
        tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "ignored SIGTERM: SIGKILL");
        let _ = child.start_kill();
        log_exit(svc, index, child.wait().await.ok());
        Outcome::Stopped
    }
}

pub(super) enum Outcome {
    Exited,
    /// Stopped on request (removal, fewer processes, core shutdown).
    Stopped,
    /// Stopped to be started again at once (admin restart).
    Restart,
}

fn log_exit(svc: &Service, index: u32, status: Option<ExitStatus>) {
    use std::os::unix::process::ExitStatusExt;
    let how = match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exited with code {c}"),
            (_, Some(sig)) => format!("killed by signal {sig}"),
            _ => "exited".to_string(),
        },
        None => "exited (status unknown)".to_string(),
    };
    if status.is_some_and(|s| s.success()) {
        tracing::info!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} {how}");
    } else {
        tracing::warn!(service = %svc.prefix, service_id = svc.id, process = index, "process {index} {how}");
    }
}

/// A token a process presents in HELLO: 128 random bits, so a process cannot
/// guess another's.
fn new_token() -> String {
    let mut b = [0u8; 16];
    cumulo_sys::random_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
