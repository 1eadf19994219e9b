//! `cumulo bench request --config FILE`: a core of its own for the run,
//! started as a child process (`cumulo run`) and stopped after, so the
//! measurement includes nothing a real deployment would not have.

use anyhow::Context;
use std::path::Path;
use std::time::Duration;
use tokio::process::{Child, Command};

pub struct OwnCore {
    child: Child,
    pub socket: String,
}

impl OwnCore {
    /// Starts `cumulo run --config config`, whose socket is `socket`.
    pub async fn start(config: &Path, socket: String) -> anyhow::Result<OwnCore> {
        let exe = std::env::current_exe().context("cannot find the cumulo binary to start a core")?;
        let mut cmd = Command::new(exe);
        cmd.arg("run").arg("--config").arg(config).arg("--log-level").arg("warn");
        cmd.stdin(std::process::Stdio::null()).kill_on_drop(true);
        // Its own process group (signalled as one), dying with this process.
        cmd.process_group(0);
        cumulo_sys::die_with_parent(&mut cmd);
        let child = cmd.spawn().context("cannot start a core")?;
        Ok(OwnCore { child, socket })
    }

    /// SIGTERM, and SIGKILL if it has not stopped in 10 s.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            cumulo_sys::signal(pid, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
        }
    }
}
