//! Real `nats-server` processes for the cluster tests: one server, or a
//! NATS cluster of several (routes between them), on free loopback ports,
//! killed on drop; with JetStream (its store in the server's folder) where
//! a test asks for it.
#![allow(unsafe_code, reason = "signals and rlimits for test processes through libc; a SAFETY comment on every block")]

use crate::harness::{free_port, TempDir};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a nats-server gets to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// The nats-server binary: `NATS_SERVER`, else on PATH, else Debian's.
pub fn nats_server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        return PathBuf::from(p);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/sbin", "/usr/bin"]) {
        let p = PathBuf::from(dir).join("nats-server");
        if p.is_file() {
            return p;
        }
    }
    panic!("nats-server is not installed (bash scripts/setup.sh installs it), or set NATS_SERVER");
}

/// One nats-server process.
pub struct NatsServer {
    pub port: u16,
    pub cluster_port: u16,
    dir: TempDir,
    conf: PathBuf,
    child: Option<Child>,
}

impl NatsServer {
    /// A lone server; `max_payload` in bytes when given.
    pub fn start(max_payload: Option<u32>) -> NatsServer {
        let mut s = NatsServer::configure(free_port(), free_port(), &[], max_payload, false);
        s.run();
        s
    }

    /// A lone server with `extra` appended to its config file (users and
    /// their permissions, say).
    pub fn start_with_conf(extra: &str) -> NatsServer {
        let mut s = NatsServer::configure(free_port(), free_port(), &[], None, false);
        let mut conf = std::fs::read_to_string(&s.conf).unwrap();
        conf.push_str(extra);
        std::fs::write(&s.conf, conf).unwrap();
        s.run();
        s
    }

    /// A lone server with JetStream (`-js`), its store in its folder.
    pub fn start_jetstream(max_payload: Option<u32>) -> NatsServer {
        let mut s = NatsServer::configure(free_port(), free_port(), &[], max_payload, true);
        s.run();
        s
    }

    fn configure(port: u16, cluster_port: u16, routes: &[u16], max_payload: Option<u32>, js: bool) -> NatsServer {
        let dir = TempDir::new();
        let mut conf = format!("host: 127.0.0.1\nport: {port}\n");
        if js {
            // A JetStream cluster needs each server named.
            conf.push_str(&format!(
                "server_name: s{port}\njetstream {{\n  store_dir: \"{}\"\n}}\n",
                dir.0.join("js").display()
            ));
        }
        if let Some(n) = max_payload {
            conf.push_str(&format!("max_payload: {n}\n"));
        }
        if !routes.is_empty() {
            let routes: Vec<String> = routes.iter().map(|p| format!("\"nats://127.0.0.1:{p}\"")).collect();
            conf.push_str(&format!(
                "cluster {{\n  name: cumulo_test\n  host: 127.0.0.1\n  port: {cluster_port}\n  routes: [{}]\n}}\n",
                routes.join(", ")
            ));
        }
        let path = dir.0.join("nats.conf");
        std::fs::write(&path, conf).unwrap();
        NatsServer { port, cluster_port, dir, conf: path, child: None }
    }

    fn run(&mut self) {
        let log = std::fs::File::create(self.dir.0.join("nats.log")).unwrap();
        let child = Command::new(nats_server_bin())
            .arg("-c")
            .arg(&self.conf)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen on {}: {}", self.port, self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("nats.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): a server that hangs, its
    /// connections open and silent (a partition, as its clients see it).
    pub fn pause(&self, stopped: bool) {
        if let Some(pid) = self.pid() {
            let sig = if stopped { libc::SIGSTOP } else { libc::SIGCONT };
            // SAFETY: kill(2) on the pid of our own child, not yet reaped.
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }

    /// Starts it again on the same ports and config.
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.pause(false);
        self.kill();
    }
}

/// A NATS cluster of `n` servers, each routed to the others.
pub struct NatsCluster {
    pub servers: Vec<NatsServer>,
}

impl NatsCluster {
    pub fn start(n: usize) -> NatsCluster {
        NatsCluster::start_with(n, false)
    }

    /// A cluster of `n` servers with JetStream clustered over them.
    pub fn start_jetstream(n: usize) -> NatsCluster {
        NatsCluster::start_with(n, true)
    }

    fn start_with(n: usize, js: bool) -> NatsCluster {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let routes: Vec<u16> = ports.iter().map(|p| p.1).collect();
        let mut servers: Vec<NatsServer> =
            ports.iter().map(|&(p, c)| NatsServer::configure(p, c, &routes, None, js)).collect();
        for s in &mut servers {
            s.run();
        }
        NatsCluster { servers }
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(NatsServer::url).collect()
    }
}
