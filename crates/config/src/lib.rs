//! The configuration file (TOML): parsing, defaults and validation.
//!
//! Every key is documented in `docs/CONFIG.md`; `examples/cumulo.toml` is a
//! fully commented example. Invalid files are refused with the file, the field
//! and the reason.

pub mod admin;
pub mod cluster;
pub mod policy;
pub mod trace;
mod trust;

pub use trust::{check_token, expand as expand_acl, AclGroups, Anonymous, ClientConfig, MAX_ACL_PATTERNS, MAX_CLIENTS};

pub use admin::{read_token_file, AdminConfig, AdminToken, Role, DEFAULT_ADMIN_PORT};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// What the config knows of the internal services: the binary's catalogue,
/// handed in by whoever loads a file (the services are crates above this
/// one, so it cannot name them). A file or an admin API call naming an
/// internal service is checked against it at once: a bad setting refuses
/// the file, it does not stop a running core.
pub struct Catalogue {
    /// Names accepted in `internal = "..."`.
    pub known: &'static [&'static str],
    /// Checks the settings of the internal service `name` (one of `known`).
    pub check: fn(name: &str, settings: &toml::Table) -> Result<(), String>,
    /// Why this service needs a `[cluster]` section, if it does (a queue on
    /// JetStream keeps its requests on the cloud's NATS), said after its
    /// name: "is a queue with backend = ...: add a [cluster] section ...".
    pub needs_cluster: fn(name: &str, settings: &toml::Table) -> Option<&'static str>,
    /// The settings of the internal service `name` that are file paths: a
    /// relative one is made absolute against the config file's folder, as
    /// every other path of the file is.
    pub file_settings: fn(name: &str) -> &'static [&'static str],
}

/// Default limit on a frame, bytes (see `cumulo_proto::DEFAULT_MAX_FRAME`).
pub const DEFAULT_MAX_FRAME: u32 = cumulo_proto::DEFAULT_MAX_FRAME;
/// Default cap on open instance connections: far above any one machine's
/// service count, low enough that a connection flood cannot exhaust file
/// descriptors.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4096;
/// Default cap on bytes waiting to be written to one connection: a reader that
/// falls this far behind is a slow consumer and is disconnected (64 MiB).
pub const DEFAULT_MAX_OUTBOX: u32 = 64 * 1024 * 1024;
/// Default time a new connection has to send HELLO, ms: a client that
/// connects and never speaks holds a descriptor no longer than this.
pub const DEFAULT_HELLO_TIMEOUT_MS: u32 = 10_000;
/// Default cap on requests waiting for a subscriber (WAIT_FOR_SERVICE),
/// core-wide: each holds its payload until its timeout, so without a cap a
/// sender could make the core hold any amount of memory.
pub const DEFAULT_MAX_PARKED: u32 = 10_000;
/// Default cap on bytes of requests waiting in the core (queued for an
/// instance or parked for a subscriber), core-wide (256 MiB): the most the
/// core's memory can grow by for requests nobody is taking yet.
pub const DEFAULT_MAX_QUEUED_BYTES: u64 = 256 * 1024 * 1024;
/// Default cap on those bytes from one sender (64 MiB, as max_outbox): one
/// peer may not take the whole core-wide allowance from the others.
pub const DEFAULT_MAX_SENDER_QUEUED_BYTES: u64 = 64 * 1024 * 1024;
/// Default per-instance queue limit, bytes (64 MiB, as max_outbox): what
/// one instance that stops taking requests can make the core hold.
pub const DEFAULT_QUEUE_SIZE: u32 = 64 * 1024 * 1024;
/// Default cap on the subscriptions of one instance: far above what a
/// service subscribes (a handful of patterns per thread), low enough that one
/// peer can neither fill the registry (at most this x `max_pattern` bytes,
/// 4 MiB with the defaults) nor make a lookup try more than this many of its
/// wildcard patterns.
pub const DEFAULT_MAX_SUBSCRIPTIONS: u32 = 1024;
/// Default keep-alive interval, ms.
pub const DEFAULT_KEEPALIVE_MS: u32 = 5_000;
/// Default per-instance queue limit, requests.
pub const DEFAULT_QUEUE_LIMIT: u32 = 1024;
/// Queue limit of another shard's pseudo-instance, requests: see
/// [`ServiceOptions::shard`].
pub const SHARD_QUEUE_LIMIT: u32 = 1 << 20;
/// Queue limit of another node's pseudo-instance, requests: as many as the
/// subscriptions this node keeps of one node
/// (`cluster::members::MAX_REMOTE_SUBSCRIPTIONS`); see
/// [`ServiceOptions::node`].
pub const NODE_QUEUE_LIMIT: u32 = 65_536;
/// Largest window an instance may be granted: bounds the memory one instance
/// can pin in the core.
pub const MAX_WINDOW: u32 = 1024;
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoreConfig {
    /// Unix socket for instances.
    pub socket: Option<PathBuf>,
    /// Optional TCP listener for instances, e.g. "127.0.0.1:7310".
    pub tcp: Option<String>,
    /// Must be true to bind the TCP listener to a non-loopback address.
    pub allow_remote: bool,
    /// With `tcp_tls_key`: the TCP listener speaks TLS only (PEM chain).
    pub tcp_tls_cert: Option<PathBuf>,
    /// The private key of `tcp_tls_cert` (PEM).
    pub tcp_tls_key: Option<PathBuf>,
    /// CA certificates (PEM): when set, a TLS client must show a
    /// certificate one of them signed (mTLS).
    pub tcp_tls_client_ca: Option<PathBuf>,
    pub node_id: u32,
    pub max_frame: u32,
    pub max_connections: u32,
    pub max_outbox: u32,
    pub max_parked: u32,
    pub max_queued_bytes: u64,
    pub max_sender_queued_bytes: u64,
    /// Longest service name, bytes (`pattern::DEFAULT_MAX_NAME`).
    pub max_name: u32,
    /// Longest pattern, prefix included, bytes.
    pub max_pattern: u32,
    /// Most wildcards in one pattern.
    pub max_wildcards: u32,
    /// Most subscriptions one instance may hold.
    pub max_subscriptions: u32,
    pub hello_timeout: u32,
    pub keepalive: u32,
    pub allow_unmanaged: bool,
    /// What an instance without a token may do over the TCP listener.
    pub tcp_anonymous: Anonymous,
    /// What an instance without a token may do over the Unix socket.
    pub unix_anonymous: Anonymous,
    /// Options applied to unmanaged instances (tools, tests, benchmarks).
    pub unmanaged: ServiceOptions,
    /// Threads the core routes on (shards): 1 is a single
    /// event loop; the default is one per CPU.
    pub threads: u32,
    /// With more than one thread, hand each managed service connection to
    /// a shard after its HELLO (`shards::handoff`) instead of serving every
    /// one on shard 0, so that routing between services runs on every
    /// thread.
    pub spread_instances: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            socket: None,
            tcp: None,
            allow_remote: false,
            tcp_tls_cert: None,
            tcp_tls_key: None,
            tcp_tls_client_ca: None,
            node_id: 1,
            max_frame: DEFAULT_MAX_FRAME,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_outbox: DEFAULT_MAX_OUTBOX,
            max_parked: DEFAULT_MAX_PARKED,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            max_sender_queued_bytes: DEFAULT_MAX_SENDER_QUEUED_BYTES,
            max_name: cumulo_pattern::DEFAULT_MAX_NAME,
            max_pattern: cumulo_pattern::DEFAULT_MAX_PATTERN,
            max_wildcards: cumulo_pattern::DEFAULT_MAX_WILDCARDS,
            max_subscriptions: DEFAULT_MAX_SUBSCRIPTIONS,
            hello_timeout: DEFAULT_HELLO_TIMEOUT_MS,
            keepalive: DEFAULT_KEEPALIVE_MS,
            allow_unmanaged: true,
            tcp_anonymous: Anonymous::Refuse,
            unix_anonymous: Anonymous::Any,
            unmanaged: ServiceOptions::default(),
            threads: default_threads(),
            spread_instances: true,
        }
    }
}

/// Most `core.threads`: each shard is an OS thread with its own state and a
/// channel to every other one (threads² channels).
pub const MAX_THREADS: u32 = 64;

/// One thread per CPU the core may run on, at most [`MAX_THREADS`].
pub fn default_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32).clamp(1, MAX_THREADS)
}

/// How a sender picks one instance among those subscribed to the matched
/// pattern. Node-aware ones (docs/CLUSTER.md): "closest" prefers an instance
/// on this node, "furthest" one on another node, "local" and "remote" take
/// only those; with a single node every instance is local. "newest" and
/// "oldest" (CloudI's) take the instance that joined this node's registry
/// last or first. The registry is always current, so "lazy" and "immediate"
/// behave alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DestRefresh {
    ImmediateClosest,
    LazyClosest,
    ImmediateFurthest,
    LazyFurthest,
    ImmediateLocal,
    LazyLocal,
    ImmediateRemote,
    LazyRemote,
    ImmediateRandom,
    LazyRandom,
    ImmediateNewest,
    LazyNewest,
    ImmediateOldest,
    LazyOldest,
    RoundRobin,
    LeastBusy,
    None,
}

impl DestRefresh {
    /// Every policy, by discriminant (`how as u8` indexes it): how another
    /// shard reads the one a request carries (src/shards). A test checks
    /// that the order matches the declaration.
    pub const ALL: [DestRefresh; 17] = {
        use DestRefresh::*;
        [
            ImmediateClosest,
            LazyClosest,
            ImmediateFurthest,
            LazyFurthest,
            ImmediateLocal,
            LazyLocal,
            ImmediateRemote,
            LazyRemote,
            ImmediateRandom,
            LazyRandom,
            ImmediateNewest,
            LazyNewest,
            ImmediateOldest,
            LazyOldest,
            RoundRobin,
            LeastBusy,
            None,
        ]
    };
}

/// How an external service's program talks to the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// cumulo's own protocol (proto/PROTOCOL.md), through an SDK.
    #[default]
    Cumulo,
    /// CloudI's external-service protocol: a program written against one of
    /// CloudI's language APIs, unchanged (docs/CLOUDI.md).
    Cloudi,
}

/// Options shared by every service (and by unmanaged instances).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceOptions {
    pub dest_refresh: DestRefresh,
    pub timeout_init: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
    pub queue_limit: u32,
    /// Bytes its queue may hold (CloudI's queue_size, there in kB).
    pub queue_size: u32,
    pub max_window: u32,
    /// The names it may send to (patterns; `[acl]` groups are expanded at
    /// load); none: any name (CloudI's dest_list_allow).
    pub dest_list_allow: Option<Vec<String>>,
    /// The names it may not send to; checked first (CloudI's dest_list_deny).
    pub dest_list_deny: Vec<String>,
    /// Health probes the core sends each of its instances (none: not
    /// probed).
    pub health: Option<HealthProbe>,
}

/// `[service.health]`: the core sends each instance of the service a
/// request for `prefix + pattern` every `interval_ms`; an instance that
/// fails `threshold` probes in a row (an error, no answer within
/// `timeout_ms`, a window too full to take one) is out of selection until a
/// probe succeeds. An instance that does not subscribe the name is not
/// probed.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthProbe {
    pub pattern: String,
    pub interval_ms: u32,
    pub timeout_ms: u32,
    pub threshold: u32,
}

impl Default for HealthProbe {
    fn default() -> Self {
        HealthProbe { pattern: "health".into(), interval_ms: 5_000, timeout_ms: 1_000, threshold: 3 }
    }
}

impl Default for ServiceOptions {
    fn default() -> Self {
        ServiceOptions {
            dest_refresh: DestRefresh::ImmediateClosest,
            timeout_init: 5_000,
            timeout_async: 5_000,
            timeout_sync: 5_000,
            timeout_terminate: 2_000,
            priority_default: 0,
            queue_limit: DEFAULT_QUEUE_LIMIT,
            queue_size: DEFAULT_QUEUE_SIZE,
            max_window: MAX_WINDOW,
            dest_list_allow: None,
            dest_list_deny: Vec::new(),
            health: None,
        }
    }
}

impl ServiceOptions {
    /// The options of a pseudo-instance (another shard, another node),
    /// which picks among the instances there by `dest_refresh`. It stands
    /// for every instance there, so one multicast queues a copy per
    /// instance there at once (one per WebSocket connection of a gateway
    /// there): with a service's queue limit, 1024, the copies past its
    /// window and 1024 queued failed with QUEUE_FULL. Its window is the
    /// largest, 1024; its bytes stay bounded by `queue_size` (64 MiB) and
    /// `core.max_queued_bytes`, each queued request counted with its
    /// overhead (`held::REQUEST_OVERHEAD`).
    fn pseudo(dest_refresh: DestRefresh, queue_limit: u32) -> ServiceOptions {
        ServiceOptions { dest_refresh, queue_limit, ..ServiceOptions::default() }
    }

    /// Another shard of this core, served closest first (by that shard's
    /// instances, else sent on to another node). Up to
    /// [`SHARD_QUEUE_LIMIT`] requests queue for it: the instances of a
    /// shard have no count bound of their own (a gateway's WebSocket
    /// connections, 10,000 per path), so the count is set past anything
    /// the bytes allow (64 MiB of `queue_size` at 256 bytes of overhead a
    /// request hold at most 262,144): for a shard, `queue_size` is the
    /// limit. A shard is a thread of this same process: it does not go
    /// silent while this one runs, as a node may.
    pub fn shard() -> ServiceOptions {
        ServiceOptions::pseudo(DestRefresh::ImmediateClosest, SHARD_QUEUE_LIMIT)
    }

    /// Another node of the cloud, whose requests are served here by local
    /// instances only (a request crosses one hop). Up to
    /// [`NODE_QUEUE_LIMIT`] requests, and `queue_size` bytes, queue for it
    /// beyond the 1024 in flight: one multicast makes a copy per instance
    /// of that node, and this node keeps at most that many of its
    /// subscriptions (`cluster::members::MAX_REMOTE_SUBSCRIPTIONS`), so a
    /// multicast to every instance of a node fits; no more, because a node
    /// that goes silent (stopped, cut off) holds what is sent to it until
    /// it is purged (`cluster.purge_ms`), and its senders must hear
    /// `QUEUE_FULL` at once rather than pile requests up here.
    pub fn node() -> ServiceOptions {
        ServiceOptions::pseudo(DestRefresh::ImmediateLocal, NODE_QUEUE_LIMIT)
    }
}

/// One `[[service]]` table; also the JSON body of `POST /v1/services`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceConfig {
    pub prefix: String,
    /// External service: the program (PATH lookup, or relative to the config file).
    pub path: Option<String>,
    /// Internal service: its name (`echo`, ...).
    pub internal: Option<String>,
    /// External service: the protocol its program speaks.
    pub protocol: Protocol,
    pub args: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
    /// Working directory (default: the config file's folder).
    pub dir: Option<PathBuf>,
    pub count_process: u32,
    pub count_thread: u32,
    /// Restarts allowed within `max_t` seconds before the service is stopped.
    pub max_r: u32,
    pub max_t: u32,
    /// Pause before a restart, ms: keeps a crash loop from spinning the CPU.
    pub restart_delay: u32,
    pub dest_refresh: DestRefresh,
    pub timeout_init: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
    pub queue_limit: u32,
    pub queue_size: u32,
    pub max_window: u32,
    /// Names its instances may send to: patterns or `[acl]` groups.
    pub dest_list_allow: Option<Vec<String>>,
    /// Names its instances may not send to: patterns or `[acl]` groups.
    pub dest_list_deny: Vec<String>,
    /// Health probes of its instances (`[service.health]`).
    pub health: Option<HealthProbe>,
    /// Settings of an internal service (each documents its own).
    pub settings: toml::Table,
}

impl Default for ServiceConfig {
    fn default() -> Self {
        let o = ServiceOptions::default();
        ServiceConfig {
            prefix: String::new(),
            path: None,
            internal: None,
            protocol: Protocol::Cumulo,
            args: Vec::new(),
            env: Default::default(),
            dir: None,
            count_process: 1,
            count_thread: 1,
            max_r: 5,
            max_t: 300,
            restart_delay: 100,
            dest_refresh: o.dest_refresh,
            timeout_init: o.timeout_init,
            timeout_async: o.timeout_async,
            timeout_sync: o.timeout_sync,
            timeout_terminate: o.timeout_terminate,
            priority_default: o.priority_default,
            queue_limit: o.queue_limit,
            queue_size: o.queue_size,
            max_window: o.max_window,
            dest_list_allow: None,
            dest_list_deny: Vec::new(),
            health: None,
            settings: toml::Table::new(),
        }
    }
}

impl ServiceConfig {
    pub fn options(&self) -> ServiceOptions {
        ServiceOptions {
            dest_refresh: self.dest_refresh,
            timeout_init: self.timeout_init,
            timeout_async: self.timeout_async,
            timeout_sync: self.timeout_sync,
            timeout_terminate: self.timeout_terminate,
            priority_default: self.priority_default,
            queue_limit: self.queue_limit,
            queue_size: self.queue_size,
            max_window: self.max_window,
            dest_list_allow: self.dest_list_allow.clone(),
            dest_list_deny: self.dest_list_deny.clone(),
            health: self.health.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub core: CoreConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default, rename = "service")]
    pub services: Vec<ServiceConfig>,
    /// Nodes of one cloud over NATS (docs/CLUSTER.md); none: a single node.
    #[serde(default)]
    pub cluster: Option<cluster::ClusterConfig>,
    /// Named groups of patterns for `dest_list_allow` / `dest_list_deny`.
    #[serde(default)]
    pub acl: AclGroups,
    /// Unmanaged programs admitted by token (docs/SECURITY.md).
    #[serde(default, rename = "client")]
    pub clients: Vec<ClientConfig>,
    /// Resiliency policies (retries, circuit breakers, timeouts, outlier
    /// ejection) by destination; none: a request fails once.
    #[serde(default, rename = "policy")]
    pub policies: Vec<policy::PolicyConfig>,
    /// Spans exported over OTLP (docs/TRACING.md); none: nothing recorded.
    #[serde(default)]
    pub tracing: Option<trace::TracingConfig>,
    /// Folder of the config file: relative paths are resolved against it.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file it was loaded from ([`Config::load`]): what a reload reads.
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// A refused configuration: where and why.
#[derive(Debug)]
pub struct ConfigError {
    pub file: String,
    pub field: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "invalid config {}: {}", self.file, self.reason)
        } else {
            write!(f, "invalid config {}: {}: {}", self.file, self.field, self.reason)
        }
    }
}
impl std::error::Error for ConfigError {}

impl Config {
    pub fn load(path: &Path, catalogue: &Catalogue) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            field: String::new(),
            reason: format!("cannot read it: {e}"),
        })?;
        // Absolute, so that paths stay right for processes started in
        // another working directory.
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
        let mut cfg = Config::parse(&text, &file, base, catalogue)?;
        cfg.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(cfg)
    }

    pub fn parse(text: &str, file: &str, base_dir: PathBuf, catalogue: &Catalogue) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError {
            file: file.to_string(),
            field: String::new(),
            reason: e.to_string().trim().replace('\n', " "),
        })?;
        cfg.base_dir = if base_dir.as_os_str().is_empty() { PathBuf::from(".") } else { base_dir };
        for p in [&mut cfg.core.tcp_tls_cert, &mut cfg.core.tcp_tls_key, &mut cfg.core.tcp_tls_client_ca]
            .into_iter()
            .flatten()
        {
            if p.is_relative() {
                *p = cfg.base_dir.join(&*p);
            }
        }
        if let Some(c) = &mut cfg.cluster {
            c.resolve_paths(&cfg.base_dir);
        }
        for s in &mut cfg.services {
            resolve_file_settings(s, &cfg.base_dir, catalogue);
        }
        let at = |(field, reason)| ConfigError { file: file.to_string(), field, reason };
        cfg.admin.read_token_files(&cfg.base_dir).map_err(at)?;
        cfg.validate(catalogue).map_err(at)?;
        cfg.resolve_trust().map_err(at)?;
        Ok(cfg)
    }

    fn validate(&self, catalogue: &Catalogue) -> Result<(), (String, String)> {
        let c = &self.core;
        let err = |f: &str, r: &str| Err((f.to_string(), r.to_string()));
        if c.max_frame < 1024 {
            return err("core.max_frame", "must be at least 1024 bytes");
        }
        if c.max_connections == 0 {
            return err("core.max_connections", "must be at least 1");
        }
        if c.keepalive < 100 {
            return err("core.keepalive", "must be at least 100 ms");
        }
        if !(1..=MAX_THREADS).contains(&c.threads) {
            return err("core.threads", "must be 1 .. 64");
        }
        if c.max_outbox < c.max_frame {
            return err("core.max_outbox", "must be at least core.max_frame");
        }
        if c.max_sender_queued_bytes < c.max_frame as u64 {
            return err("core.max_sender_queued_bytes", "must be at least core.max_frame");
        }
        if c.max_queued_bytes < c.max_sender_queued_bytes {
            return err("core.max_queued_bytes", "must be at least core.max_sender_queued_bytes");
        }
        if c.hello_timeout < 100 {
            return err("core.hello_timeout", "must be at least 100 ms");
        }
        if !(64..=65_535).contains(&c.max_name) {
            return err("core.max_name", "must be 64 .. 65535 bytes (a name is a u16-length string)");
        }
        if !(64..=65_535).contains(&c.max_pattern) {
            return err("core.max_pattern", "must be 64 .. 65535 bytes (a pattern is a u16-length string)");
        }
        if !(1..=256).contains(&c.max_wildcards) {
            return err("core.max_wildcards", "must be 1 .. 256 (matching costs one pass over the name per wildcard)");
        }
        if c.max_subscriptions == 0 {
            return err("core.max_subscriptions", "must be at least 1");
        }
        match (&c.tcp_tls_cert, &c.tcp_tls_key) {
            (Some(_), None) | (None, Some(_)) => {
                return err(
                    "core.tcp_tls_cert",
                    "core.tcp_tls_cert and core.tcp_tls_key go together: give both or neither",
                )
            }
            (Some(_), Some(_)) if c.tcp.is_none() => {
                return err("core.tcp_tls_cert", "is set but core.tcp is not: TLS is for the TCP listener")
            }
            (None, None) if c.tcp_tls_client_ca.is_some() => return err(
                "core.tcp_tls_client_ca",
                "needs core.tcp_tls_cert and core.tcp_tls_key (client certificates are checked in the TLS handshake)",
            ),
            _ => {}
        }
        validate_options("core.unmanaged", &c.unmanaged)?;
        admin::validate(&self.admin)?;
        policy::validate("policy", &self.policies)?;
        if let Some(cluster) = &self.cluster {
            cluster::validate(cluster)?;
        }
        if let Some(tracing) = &self.tracing {
            trace::validate(tracing)?;
        }
        for (i, s) in self.services.iter().enumerate() {
            validate_service(&format!("service[{i}] ({})", s.prefix), s, catalogue)?;
            let needs = s.internal.as_deref().and_then(|name| (catalogue.needs_cluster)(name, &s.settings));
            if let (None, Some(why)) = (&self.cluster, needs) {
                return Err(("cluster.servers".into(), format!("service[{i}] ({}) {why}", s.prefix)));
            }
        }
        Ok(())
    }

    /// Reads the clients' token files and expands every `[acl]` group
    /// named in a `dest_list_allow` / `dest_list_deny` into its patterns.
    fn resolve_trust(&mut self) -> Result<(), (String, String)> {
        trust::check_groups(&self.acl)?;
        let groups = &self.acl;
        expand_lists(
            "core.unmanaged",
            &mut self.core.unmanaged.dest_list_allow,
            &mut self.core.unmanaged.dest_list_deny,
            groups,
        )?;
        for (i, s) in self.services.iter_mut().enumerate() {
            let at = format!("service[{i}] ({})", s.prefix);
            expand_lists(&at, &mut s.dest_list_allow, &mut s.dest_list_deny, groups)?;
        }
        trust::resolve_clients(&mut self.clients, groups, &self.base_dir)
    }

    /// The limits on names and patterns (`[core] max_name`, ...).
    pub fn name_limits(&self) -> cumulo_pattern::NameLimits {
        cumulo_pattern::NameLimits {
            max_name: self.core.max_name as usize,
            max_pattern: self.core.max_pattern as usize,
            max_wildcards: self.core.max_wildcards as usize,
        }
    }

    /// The Unix socket path: configured, or a per-user default.
    pub fn socket_path(&self) -> PathBuf {
        if let Some(p) = &self.core.socket {
            return if p.is_absolute() { p.clone() } else { self.base_dir.join(p) };
        }
        default_socket_path()
    }
}

/// Expands the groups of one service's lists in place.
fn expand_lists(
    at: &str,
    allow: &mut Option<Vec<String>>,
    deny: &mut Vec<String>,
    groups: &AclGroups,
) -> Result<(), (String, String)> {
    if let Some(a) = allow {
        *a = trust::expand(a, groups).map_err(|why| (format!("{at}.dest_list_allow"), why))?;
    }
    *deny = trust::expand(deny, groups).map_err(|why| (format!("{at}.dest_list_deny"), why))?;
    Ok(())
}

/// Makes the relative file paths among an internal service's settings
/// (`Catalogue::file_settings`) absolute against `base`.
pub fn resolve_file_settings(s: &mut ServiceConfig, base: &Path, catalogue: &Catalogue) {
    let Some(name) = s.internal.as_deref() else { return };
    for key in (catalogue.file_settings)(name) {
        if let Some(toml::Value::String(p)) = s.settings.get_mut(*key) {
            if !p.is_empty() && Path::new(p.as_str()).is_relative() {
                *p = base.join(&*p).display().to_string();
            }
        }
    }
}

/// Services given as JSON (the body of `POST /v1/services`): one object or a
/// list of them, each with the keys of a `[[service]]` table, checked exactly
/// as the config file's are. Errors name the field ("service[1] (/a/).max_t").
/// Their `dest_list_allow` / `dest_list_deny` may name the running
/// config's `[acl]` groups (`groups`).
pub fn services_from_json(
    body: &[u8],
    catalogue: &Catalogue,
    groups: &AclGroups,
) -> Result<Vec<ServiceConfig>, (String, String)> {
    use serde_json::Value;
    let v: Value = serde_json::from_slice(body).map_err(|e| (String::new(), format!("not valid JSON: {e}")))?;
    let items = match v {
        Value::Array(items) => items,
        one @ Value::Object(_) => vec![one],
        _ => return Err((String::new(), "expected a service (a JSON object) or a list of them".into())),
    };
    if items.is_empty() {
        return Err((String::new(), "the list of services is empty".into()));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let mut s: ServiceConfig =
            serde_json::from_value(item).map_err(|e| (format!("service[{i}]"), e.to_string()))?;
        let at = format!("service[{i}] ({})", s.prefix);
        validate_service(&at, &s, catalogue)?;
        expand_lists(&at, &mut s.dest_list_allow, &mut s.dest_list_deny, groups)?;
        out.push(s);
    }
    Ok(out)
}

/// Checks one service as the config file and the admin API both do; `at`
/// names it in errors ("service[2] (/a/)").
pub fn validate_service(at: &str, s: &ServiceConfig, catalogue: &Catalogue) -> Result<(), (String, String)> {
    let at_field = |f: &str| format!("{at}.{f}");
    if !s.prefix.starts_with('/') || !s.prefix.ends_with('/') {
        return Err((at_field("prefix"), "must start and end with '/'".into()));
    }
    if let Err(why) = cumulo_pattern::validate(&s.prefix) {
        return Err((at_field("prefix"), why));
    }
    match (&s.path, &s.internal) {
        (Some(_), Some(_)) => return Err((at_field("path"), "give either path or internal, not both".into())),
        (None, None) => {
            return Err((at_field("path"), "give path (a program) or internal (a built-in service)".into()))
        }
        (Some(p), None) if p.is_empty() => return Err((at_field("path"), "must not be empty".into())),
        (None, Some(name)) if !catalogue.known.contains(&name.as_str()) => {
            return Err((
                at_field("internal"),
                format!("unknown internal service '{name}' (known: {})", catalogue.known.join(", ")),
            ))
        }
        // Settings are checked now, not when the service starts: a bad one
        // must refuse the file (or the API call), not stop a running core.
        (None, Some(name)) => (catalogue.check)(name, &s.settings).map_err(|why| (at_field("settings"), why))?,
        _ => {}
    }
    if s.protocol == Protocol::Cloudi && s.internal.is_some() {
        return Err((at_field("protocol"), "cloudi is for external services (path), not internal ones".into()));
    }
    if s.count_process == 0 || s.count_process > 1024 {
        return Err((at_field("count_process"), "must be 1 .. 1024".into()));
    }
    if s.count_thread == 0 || s.count_thread > 1024 {
        return Err((at_field("count_thread"), "must be 1 .. 1024".into()));
    }
    if s.max_t == 0 {
        return Err((at_field("max_t"), "must be at least 1 second".into()));
    }
    if s.internal.as_deref() == Some("http") && (s.count_process > 1 || s.count_thread > 1) {
        return Err((
            at_field("count_process"),
            "the http gateway listens on one port: count_process and count_thread must be 1".into(),
        ));
    }
    if s.internal.as_deref() == Some("queue") && (s.count_process > 1 || s.count_thread > 1) {
        return Err((
            at_field("count_process"),
            "a queue keeps one log in its directory: count_process and count_thread must be 1 (run several queues \
             with their own prefixes and directories to spread the load)"
                .into(),
        ));
    }
    validate_options(at, &s.options())
}

fn validate_options(at: &str, o: &ServiceOptions) -> Result<(), (String, String)> {
    let check = |ok: bool, f: &str, r: &str| if ok { Ok(()) } else { Err((format!("{at}.{f}"), r.to_string())) };
    check(o.timeout_async > 0, "timeout_async", "must be at least 1 ms")?;
    check(o.timeout_sync > 0, "timeout_sync", "must be at least 1 ms")?;
    check(o.timeout_init > 0, "timeout_init", "must be at least 1 ms")?;
    check(o.queue_limit > 0, "queue_limit", "must be at least 1")?;
    check(o.queue_size >= 1024, "queue_size", "must be at least 1024 bytes")?;
    check((1..=MAX_WINDOW).contains(&o.max_window), "max_window", "must be 1 .. 1024")?;
    if let Some(h) = &o.health {
        check(
            !h.pattern.is_empty() && !cumulo_pattern::has_wildcard(&h.pattern),
            "health.pattern",
            "must be a name (no wildcard): the core sends each instance a request for prefix + pattern",
        )?;
        check(h.interval_ms >= 100, "health.interval_ms", "must be at least 100 ms")?;
        check(
            h.timeout_ms >= 1 && h.timeout_ms < h.interval_ms,
            "health.timeout_ms",
            "must be at least 1 ms and shorter than health.interval_ms",
        )?;
        check(h.threshold >= 1, "health.threshold", "must be at least 1")?;
    }
    Ok(())
}

pub fn default_socket_path() -> PathBuf {
    if let Ok(dir) = std::env::var("XDG_RUNTIME_DIR") {
        if !dir.is_empty() {
            return PathBuf::from(dir).join("cumulo").join("cumulo.sock");
        }
    }
    let uid = unsafe_free_uid();
    PathBuf::from(format!("/tmp/cumulo-{uid}")).join("cumulo.sock")
}

fn unsafe_free_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(0)
}

#[cfg(test)]
mod tests;
