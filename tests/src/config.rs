//! Builds the TOML config a test core runs with.

use std::fmt::Display;

/// A TOML basic string.
pub fn q(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// One `[[service]]` table.
#[derive(Clone, Debug)]
pub struct Service {
    pub prefix: String,
    lines: Vec<String>,
    env: Vec<(String, String)>,
    /// Names to probe with WAIT_FOR_SERVICE before the test starts.
    pub(crate) probes: Vec<String>,
    count_process: u32,
    count_thread: u32,
    is_test_service: bool,
    waits: bool,
}

impl Service {
    fn new(prefix: &str, line: String) -> Service {
        Service {
            prefix: prefix.into(),
            lines: vec![format!("prefix = {}", q(prefix)), line],
            env: Vec::new(),
            probes: Vec::new(),
            count_process: 1,
            count_thread: 1,
            is_test_service: false,
            waits: true,
        }
    }

    /// An external program.
    pub fn program(prefix: &str, path: &str) -> Service {
        Service::new(prefix, format!("path = {}", q(path)))
    }

    /// The test service; the start waits for each of its instances to be
    /// subscribed (it prints a ready line).
    pub fn test_service(prefix: &str, path: &str) -> Service {
        let mut s = Service::program(prefix, path);
        s.is_test_service = true;
        s
    }

    /// A service built into the core.
    pub fn internal(prefix: &str, name: &str) -> Service {
        Service::new(prefix, format!("internal = {}", q(name)))
    }

    /// Any key of the service table, the value as TOML (`"..."` for strings).
    pub fn set(mut self, key: &str, value: impl Display) -> Service {
        let v = value.to_string();
        match key {
            "count_process" => self.count_process = v.parse().unwrap_or(1),
            "count_thread" => self.count_thread = v.parse().unwrap_or(1),
            _ => {}
        }
        self.lines.push(format!("{key} = {v}"));
        self
    }

    pub fn env(mut self, key: &str, value: impl Display) -> Service {
        self.env.push((key.into(), value.to_string()));
        self
    }

    /// The test_service behaviour (`TS_MODE`).
    pub fn mode(self, mode: &str) -> Service {
        self.env("TS_MODE", mode)
    }

    /// Do not wait for this service at start (it is meant to fail).
    pub fn no_wait(mut self) -> Service {
        self.waits = false;
        self
    }

    /// Wait at start until `name` answers (for services that print no ready line).
    pub fn probe(mut self, name: &str) -> Service {
        self.probes.push(name.into());
        self
    }

    pub(crate) fn expected_ready(&self) -> u32 {
        if self.is_test_service && self.waits {
            self.count_process * self.count_thread
        } else {
            0
        }
    }

    fn to_toml(&self) -> String {
        let mut t = String::from("\n[[service]]\n");
        for l in &self.lines {
            t.push_str(l);
            t.push('\n');
        }
        if !self.env.is_empty() {
            let pairs: Vec<String> = self.env.iter().map(|(k, v)| format!("{k} = {}", q(v))).collect();
            t.push_str(&format!("env = {{ {} }}\n", pairs.join(", ")));
        }
        t
    }
}

/// A whole config: `[core]` keys, extra tables, services. The socket is
/// added by the harness.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// RLIMIT_NOFILE (soft and hard) to run the core under, if set.
    pub open_files: Option<u64>,
    core: Vec<String>,
    unmanaged: Vec<String>,
    admin: Vec<String>,
    cluster: Vec<String>,
    pub services: Vec<Service>,
    /// Tables written as they are, after the services (`[acl]`, `[[client]]`).
    tables: Vec<String>,
}

impl Config {
    pub fn new() -> Config {
        Config::default()
    }

    /// A `[core]` key, the value as TOML.
    pub fn core(mut self, key: &str, value: impl Display) -> Config {
        self.core.push(format!("{key} = {value}"));
        self
    }

    /// A key of `[core.unmanaged]`, the options of unmanaged (test) clients.
    pub fn unmanaged(mut self, key: &str, value: impl Display) -> Config {
        self.unmanaged.push(format!("{key} = {value}"));
        self
    }

    /// A key of `[admin]`, the value as TOML.
    pub fn admin(mut self, key: &str, value: impl Display) -> Config {
        self.admin.push(format!("{key} = {value}"));
        self
    }

    /// A key of `[cluster]`, the value as TOML (any key makes a cluster node).
    pub fn cluster(mut self, key: &str, value: impl Display) -> Config {
        self.cluster.push(format!("{key} = {value}"));
        self
    }

    /// Runs the core with at most `n` open files (soft and hard limit, so
    /// the core cannot raise it).
    pub fn open_files(mut self, n: u64) -> Config {
        self.open_files = Some(n);
        self
    }

    /// TOML tables added as written (`[acl]`, `[[client]]`, ...).
    pub fn table(mut self, toml: &str) -> Config {
        self.tables.push(toml.to_string());
        self
    }

    pub fn service(mut self, s: Service) -> Config {
        self.services.push(s);
        self
    }

    pub fn render(&self, socket: &str) -> String {
        let mut t = format!("[core]\nsocket = {}\nthreads = {}\n", q(socket), test_threads());
        for l in &self.core {
            t.push_str(l);
            t.push('\n');
        }
        if !self.unmanaged.is_empty() {
            t.push_str("\n[core.unmanaged]\n");
            for l in &self.unmanaged {
                t.push_str(l);
                t.push('\n');
            }
        }
        if !self.admin.is_empty() {
            t.push_str("\n[admin]\n");
            for l in &self.admin {
                t.push_str(l);
                t.push('\n');
            }
        }
        if !self.cluster.is_empty() {
            t.push_str("\n[cluster]\n");
            for l in &self.cluster {
                t.push_str(l);
                t.push('\n');
            }
        }
        for s in &self.services {
            t.push_str(&s.to_toml());
        }
        for table in &self.tables {
            t.push('\n');
            t.push_str(table);
            t.push('\n');
        }
        t
    }
}

/// `core.threads` of the cores the tests start: `CUMULO_TEST_THREADS`, else 1
/// (the test command runs the suites once with 1 and once with 2).
pub fn test_threads() -> u32 {
    std::env::var("CUMULO_TEST_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// The config of node `name` (node_id `id`) of cloud `cloud` on these NATS
/// servers, with an admin port of its own: heartbeats every
/// `CLUSTER_HEARTBEAT_MS`, a node silent for `purge_ms` purged.
pub fn cluster_node(cloud: &str, servers: &[String], name: &str, id: u32, purge_ms: u32) -> Config {
    let quoted: Vec<String> = servers.iter().map(|s| q(s)).collect();
    Config::new()
        .core("node_id", id)
        .admin("port", crate::free_port())
        .cluster("node", q(name))
        .cluster("name", q(cloud))
        .cluster("servers", format!("[{}]", quoted.join(", ")))
        .cluster("heartbeat_ms", CLUSTER_HEARTBEAT_MS)
        .cluster("purge_ms", purge_ms)
}

/// The heartbeat of the nodes of `cluster_node`.
pub const CLUSTER_HEARTBEAT_MS: u32 = 100;
