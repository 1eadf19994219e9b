//! The client commands (`cumulo services ...`, `cumulo subscriptions`,
//! `cumulo status`, `cumulo log-level`, `cumulo resiliency`, ...): they talk to a running core's
//! admin API and print what it says in a readable form (or as JSON with
//! `--output json`).

mod client;
pub mod help;
mod queues;
mod resiliency;
pub mod scaffold;
mod show;
mod subscriptions;
mod table;

pub use client::{AdminClient, Reply};
pub use queues::{queues, QueuesCommand};
pub use resiliency::{resiliency, ResiliencyCommand};
pub use scaffold::NewArgs;
pub use subscriptions::{subscriptions, SubscriptionsArgs};

use clap::{Args, Subcommand};
use cumulo_config::DEFAULT_ADMIN_PORT;
use hyper::Method;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the admin API is: `--admin`/`--token`, else `CUMULO_ADMIN`/
/// `CUMULO_ADMIN_TOKEN`, else the token in `--token-file` /
/// `CUMULO_ADMIN_TOKEN_FILE`, else the `[admin]` section of `--config`,
/// else http://127.0.0.1:7311 without a token.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// The admin API, e.g. http://127.0.0.1:7311.
    #[arg(long, global = true, help_heading = ADMIN_HEADING, env = "CUMULO_ADMIN", value_name = "URL")]
    pub admin: Option<String>,
    /// Bearer token, if the core's [admin] section sets one.
    #[arg(long, global = true, help_heading = ADMIN_HEADING, env = "CUMULO_ADMIN_TOKEN", hide_env_values = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Read the bearer token from this file (only its owner may read it).
    #[arg(long, global = true, help_heading = ADMIN_HEADING, env = "CUMULO_ADMIN_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Read the admin address and token from this core config file.
    #[arg(short, long, global = true, help_heading = ADMIN_HEADING, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output: readable text, or the API's JSON answer.
    #[arg(short, long, global = true, help_heading = ADMIN_HEADING, value_enum, default_value = "text")]
    pub output: Output,
}

/// The heading of the options every client command shares: listed after
/// the command's own, which are what its --help is read for.
pub const ADMIN_HEADING: &str = "Admin API";

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
}

impl AdminArgs {
    fn json(&self) -> bool {
        self.output == Output::Json
    }
}

#[derive(Subcommand, Debug)]
pub enum ServicesCommand {
    /// Add services from a TOML file of [[service]] tables (relative paths
    /// are relative to that file), or from JSON with --json.
    #[command(after_help = help::SERVICES_ADD)]
    Add {
        /// A TOML file with [[service]] tables (or one service's keys at top level).
        #[arg(required_unless_present = "json_body", conflicts_with = "json_body")]
        file: Option<PathBuf>,
        /// The services as JSON: one object or a list, keys as in a [[service]] table.
        #[arg(long = "json", value_name = "JSON")]
        json_body: Option<String>,
    },
    /// List services: id, prefix, kind, status, processes, instances, restarts,
    /// requests handled, patterns subscribed.
    #[command(after_help = help::SERVICES_LIST)]
    List,
    /// Show one service: the patterns it subscribes, its processes, counters
    /// and configuration.
    #[command(after_help = help::SERVICES_SHOW)]
    Show {
        /// The service's id (the ID column of `cumulo services list`).
        id: String,
    },
    /// Remove a service: no new requests, its processes finish and stop.
    #[command(after_help = help::SERVICES_REMOVE)]
    Remove {
        /// The service's id (the ID column of `cumulo services list`).
        id: String,
    },
    /// Restart a service's processes one after the other.
    #[command(after_help = help::SERVICES_RESTART)]
    Restart {
        /// The service's id (the ID column of `cumulo services list`).
        id: String,
    },
    /// Change a running service's options (those not given keep their values).
    #[command(after_help = help::SERVICES_UPDATE)]
    Update(UpdateArgs),
}

#[derive(Args, Debug)]
pub struct UpdateArgs {
    /// The service's id (the ID column of `cumulo services list`).
    pub id: String,
    /// Processes to run (fewer: the highest indexes stop gracefully).
    #[arg(long, value_name = "N")]
    pub count_process: Option<u32>,
    /// Time a new process has to connect all its threads.
    #[arg(long, value_name = "MS")]
    pub timeout_init: Option<u32>,
    /// Default timeout of send_async from the service's instances.
    #[arg(long, value_name = "MS")]
    pub timeout_async: Option<u32>,
    /// Default timeout of send_sync from the service's instances.
    #[arg(long, value_name = "MS")]
    pub timeout_sync: Option<u32>,
    /// Time between TERMINATE and SIGTERM when a process is stopped.
    #[arg(long, value_name = "MS")]
    pub timeout_terminate: Option<u32>,
    /// Requests queued per instance beyond its window.
    #[arg(long, value_name = "N")]
    pub queue_limit: Option<u32>,
    /// Bytes of requests queued per instance beyond its window (at least 1024).
    #[arg(long, value_name = "BYTES")]
    pub queue_size: Option<u32>,
    /// immediate_closest, lazy_closest, immediate_random, lazy_random, round_robin, least_busy, none,
    /// or another of CloudI's (docs/CLOUDI.md).
    #[arg(long, value_name = "HOW")]
    pub dest_refresh: Option<String>,
    /// Restarts allowed within max_t before a process is given up.
    #[arg(long, value_name = "N")]
    pub max_r: Option<u32>,
    /// The window of max_r.
    #[arg(long, value_name = "SECONDS")]
    pub max_t: Option<u32>,
    /// Pause before a restart.
    #[arg(long, value_name = "MS")]
    pub restart_delay: Option<u32>,
}

/// What a client command prints, or why it failed.
pub type Outcome = Result<String, String>;

pub fn client(a: &AdminArgs) -> Result<AdminClient, String> {
    let from_file = match &a.config {
        Some(path) => Some(
            cumulo_config::Config::load(path, &crate::internal::settings::CATALOGUE).map_err(|e| e.to_string())?.admin,
        ),
        None => None,
    };
    let url = match (&a.admin, &from_file) {
        (Some(u), _) => u.clone(),
        (None, Some(cfg)) if !cfg.enabled() => {
            return Err(format!(
                "{}: [admin] port = 0, so that core has no admin API",
                a.config.as_ref().unwrap().display()
            ))
        }
        (None, Some(cfg)) => {
            let mut addr = cfg.socket_addr();
            if addr.ip().is_unspecified() {
                // Listening on every address: loopback reaches it.
                addr.set_ip(if addr.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                });
            }
            format!("http://{addr}")
        }
        (None, None) => format!("http://127.0.0.1:{DEFAULT_ADMIN_PORT}"),
    };
    let token = match (&a.token, &a.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(file)) => Some(cumulo_config::read_token_file(file)?),
        (None, None) => from_file.and_then(|c| c.client_token().map(str::to_string)),
    };
    AdminClient::new(&url, token)
}

/// Makes a call and returns its JSON, or the API's error as a message.
fn call(c: &AdminClient, method: Method, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let reply = c.call(method, path, body)?;
    if (200..300).contains(&reply.status) {
        return reply.json();
    }
    let (code, message) = match reply.json() {
        Ok(v) => (v["code"].as_str().unwrap_or("error").to_string(), v["message"].as_str().unwrap_or("").to_string()),
        Err(_) => ("error".to_string(), String::from_utf8_lossy(&reply.body).into_owned()),
    };
    let hint = match reply.status {
        401 => {
            "\n  give the admin token with --token, CUMULO_ADMIN_TOKEN, --token-file or CUMULO_ADMIN_TOKEN_FILE \
                (or --config with the core's config file)"
        }
        403 => "\n  this token may only read: changes need a token with the role operate",
        _ => "",
    };
    Err(format!("{message} ({code}, HTTP {}){hint}", reply.status))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

pub fn services(a: &AdminArgs, cmd: ServicesCommand) -> Outcome {
    let c = client(a)?;
    match cmd {
        ServicesCommand::Add { file, json_body } => {
            let body = match (file, json_body) {
                (_, Some(text)) => serde_json::from_str(&text).map_err(|e| format!("--json is not valid JSON: {e}"))?,
                (Some(path), None) => services_from_toml_file(&path)?,
                (None, None) => return Err("give a TOML file or --json '{...}'".into()),
            };
            let v = call(&c, Method::POST, "/v1/services", Some(&body))?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let lines: Vec<String> = v["services"]
                .as_array()
                .map(|s| {
                    s.iter()
                        .map(|s| format!("added service {} ({})", s["id"], s["prefix"].as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            Ok(lines.join("\n") + "\n")
        }
        ServicesCommand::List => {
            let v = call(&c, Method::GET, "/v1/services", None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let patterns = subscriptions::by_service(&subscriptions::fetch(&c)?);
            Ok(services_table(&v, &patterns))
        }
        ServicesCommand::Show { id } => {
            let v = call(&c, Method::GET, &format!("/v1/services/{id}"), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let mut patterns = subscriptions::by_service(&subscriptions::fetch(&c)?);
            let mine = v["id"].as_u64().and_then(|id| patterns.remove(&id)).unwrap_or_default();
            Ok(show::render(&v, &mine))
        }
        ServicesCommand::Remove { id } => {
            let v = call(&c, Method::DELETE, &format!("/v1/services/{id}"), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            Ok(format!(
                "removed service {id} ({}): {} processes stopped\n",
                v["prefix"].as_str().unwrap_or(""),
                v["processes_stopped"]
            ))
        }
        ServicesCommand::Restart { id } => {
            let v = call(&c, Method::POST, &format!("/v1/services/{id}/restart"), None)?;
            if a.json() {
                return Ok(pretty(&v));
            }
            Ok(format!(
                "restarting service {id} ({}): its processes restart one after the other; `cumulo services list` shows when it is running again\n",
                v["prefix"].as_str().unwrap_or("")
            ))
        }
        ServicesCommand::Update(u) => {
            let id = u.id.clone();
            let body = update_body(u)?;
            let v = call(&c, Method::PATCH, &format!("/v1/services/{id}"), Some(&body))?;
            if a.json() {
                return Ok(pretty(&v));
            }
            let changed: Vec<String> = body.as_object().unwrap().iter().map(|(k, v)| format!("{k} = {v}")).collect();
            Ok(format!("updated service {id} ({}): {}\n", v["prefix"].as_str().unwrap_or(""), changed.join(", ")))
        }
    }
}

fn update_body(u: UpdateArgs) -> Result<Value, String> {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    };
    put("count_process", u.count_process.map(Value::from));
    put("timeout_init", u.timeout_init.map(Value::from));
    put("timeout_async", u.timeout_async.map(Value::from));
    put("timeout_sync", u.timeout_sync.map(Value::from));
    put("timeout_terminate", u.timeout_terminate.map(Value::from));
    put("queue_limit", u.queue_limit.map(Value::from));
    put("queue_size", u.queue_size.map(Value::from));
    put("dest_refresh", u.dest_refresh.map(Value::from));
    put("max_r", u.max_r.map(Value::from));
    put("max_t", u.max_t.map(Value::from));
    put("restart_delay", u.restart_delay.map(Value::from));
    if m.is_empty() {
        return Err("nothing to change: give at least one option, e.g. --count-process 4 (see --help)".into());
    }
    Ok(Value::Object(m))
}

/// `patterns`: each service's subscribed patterns (their count is a column).
fn services_table(v: &Value, patterns: &BTreeMap<u64, Vec<(String, usize)>>) -> String {
    let empty = vec![];
    let list = v["services"].as_array().unwrap_or(&empty);
    if list.is_empty() {
        return "no services\n".into();
    }
    let s = table::cell;
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|x| {
            vec![
                s(&x["id"]),
                s(&x["prefix"]),
                s(&x["kind"]),
                s(&x["status"]),
                s(&x["count_process"]),
                s(&x["count_thread"]),
                s(&x["instances"]),
                s(&x["restarts"]),
                s(&x["requests_handled"]),
                x["id"].as_u64().and_then(|id| patterns.get(&id)).map_or(0, Vec::len).to_string(),
                s(&x["program"]),
            ]
        })
        .collect();
    table::render(
        &[
            "ID",
            "PREFIX",
            "KIND",
            "STATUS",
            "PROCESSES",
            "THREADS",
            "INSTANCES",
            "RESTARTS",
            "HANDLED",
            "PATTERNS",
            "PROGRAM",
        ],
        &rows,
    )
}

/// `cumulo nodes`: this node and the others of its cloud, one per line.
pub fn nodes(a: &AdminArgs) -> Outcome {
    let c = client(a)?;
    let v = call(&c, Method::GET, "/v1/nodes", None)?;
    if a.json() {
        return Ok(pretty(&v));
    }
    let s = table::cell;
    let rows: Vec<Vec<String>> = v["nodes"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|n| {
                    let hb = match &n["last_heartbeat_ms_ago"] {
                        Value::Number(ms) => format!("{ms} ms ago"),
                        _ => "-".into(),
                    };
                    vec![
                        s(&n["name"]),
                        s(&n["id"]),
                        s(&n["state"]),
                        hb,
                        s(&n["patterns"]),
                        s(&n["subscriptions"]),
                        s(&n["requests_in_flight"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let head = match &v["cluster"] {
        Value::Object(cl) => format!(
            "cloud '{}' over NATS {} ({})\n",
            s(&cl["name"]),
            cl["servers"].as_array().map(|l| l.iter().map(s).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
            if cl["connected"].as_bool() == Some(true) { "connected" } else { "NOT CONNECTED" }
        ),
        _ => "a single node (no [cluster] section)\n".into(),
    };
    Ok(head
        + &table::render(&["NODE", "NODE_ID", "STATE", "HEARTBEAT", "PATTERNS", "SUBSCRIPTIONS", "IN_FLIGHT"], &rows))
}

pub fn status(a: &AdminArgs) -> Outcome {
    let c = client(a)?;
    let v = call(&c, Method::GET, "/v1/status", None)?;
    if a.json() {
        return Ok(pretty(&v));
    }
    let by_status: Vec<String> = v["services"]["by_status"]
        .as_object()
        .map(|m| m.iter().map(|(k, n)| format!("{n} {k}")).collect())
        .unwrap_or_default();
    let t = &v["totals"];
    let mut out = format!(
        "cumulo {} node {} at {}, up {}\n",
        v["version"].as_str().unwrap_or("?"),
        v["node_id"],
        c.url,
        uptime(v["uptime_seconds"].as_f64().unwrap_or(0.0))
    );
    if v["shutting_down"].as_bool() == Some(true) {
        out.push_str("SHUTTING DOWN\n");
    }
    out += &format!(
        "services:  {} ({})\ninstances: {} in {} processes, {} subscriptions\nrequests:  {} in flight, {} queued\ntotals:    {} requests, {} responses, {} timeouts, {} late, {} no_service, {} unavailable, {} queue_full, {} crashed\nrefused:   {} connections (unauthorized), {} sends and subscriptions (denied)\nlog level: {}\n",
        v["services"]["total"],
        if by_status.is_empty() { "none".to_string() } else { by_status.join(", ") },
        v["instances"],
        v["processes"],
        v["subscriptions"],
        v["requests_in_flight"],
        v["requests_queued"],
        t["requests"], t["responses"], t["timeouts"], t["late"], t["no_service"], t["unavailable"], t["queue_full"], t["crashed"],
        t["unauthorized"], t["denied"],
        v["log_level"].as_str().unwrap_or("?"),
    );
    Ok(out)
}

fn uptime(s: f64) -> String {
    let s = s as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

pub fn log_level(a: &AdminArgs, level: &str) -> Outcome {
    let c = client(a)?;
    let v = call(&c, Method::PUT, "/v1/log-level", Some(&json!({ "level": level })))?;
    if a.json() {
        return Ok(pretty(&v));
    }
    Ok(format!("log level: {} (was {})\n", v["level"].as_str().unwrap_or(level), v["previous"].as_str().unwrap_or("?")))
}

/// `POST /v1/reload` (with `dry_run`: only what it would do), said as a
/// list of what changes.
pub fn reload(a: &AdminArgs, dry_run: bool) -> Outcome {
    let c = client(a)?;
    let path = if dry_run { "/v1/reload?dry_run=true" } else { "/v1/reload" };
    let v = call(&c, Method::POST, path, None)?;
    if a.json() {
        return Ok(pretty(&v));
    }
    Ok(describe_reload(&v, dry_run))
}

fn describe_reload(v: &Value, dry_run: bool) -> String {
    let file = v["file"].as_str().unwrap_or("?");
    let mut out = if dry_run { format!("a reload of {file} would:\n") } else { format!("reloaded {file}:\n") };
    let list = |key: &str| v[key].as_array().cloned().unwrap_or_default();
    let mut changed = false;
    for (key, mark, word) in
        [("added", '+', "add"), ("removed", '-', "remove"), ("updated", '~', "update"), ("replaced", '*', "replace")]
    {
        for s in list(key) {
            changed = true;
            let id = s["id"].as_u64().map(|i| format!(" [{i}]")).unwrap_or_default();
            let changes = s["changes"].as_str().filter(|c| !c.is_empty()).map(|c| format!(": {c}")).unwrap_or_default();
            out.push_str(&format!(
                "  {mark} {word} {}{id} ({}){changes}\n",
                s["prefix"].as_str().unwrap_or("?"),
                s["what"].as_str().unwrap_or("")
            ));
        }
    }
    if let Some(names) = v["policies"]["names"].as_array() {
        changed = true;
        let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
        out.push_str(&format!("  * replace the policies on every shard: {} ({})\n", names.len(), names.join(", ")));
    }
    if !changed {
        out.push_str("  nothing to change\n");
    }
    out.push_str(&format!("  {} unchanged\n", v["unchanged"].as_u64().unwrap_or(0)));
    for s in list("kept") {
        out.push_str(&format!(
            "  = keep {} [{}] (added through the admin API, not in the file)\n",
            s["prefix"].as_str().unwrap_or("?"),
            s["id"].as_u64().unwrap_or(0)
        ));
    }
    out
}

/// Reads [[service]] tables (or one service's keys at the top level) and
/// makes their relative `path` and `dir` absolute against the file's folder,
/// as the core does for its own config file.
pub fn services_from_toml_file(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.to_string().trim()))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let base = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
    let mut items: Vec<toml::Table> = match table.get("service") {
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_table().cloned().ok_or_else(|| format!("{}: every [[service]] must be a table", path.display()))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("{}: 'service' must be written [[service]]", path.display())),
        None if table.contains_key("prefix") => vec![table.clone()],
        None => return Err(format!("{}: no [[service]] table in it", path.display())),
    };
    for s in &mut items {
        let internal = s.get("internal").and_then(|v| v.as_str()).map(str::to_string);
        let file_settings =
            internal.map_or(&[][..], |name| (crate::internal::settings::CATALOGUE.file_settings)(&name));
        if let Some(toml::Value::Table(settings)) = s.get_mut("settings") {
            for key in file_settings {
                if let Some(toml::Value::String(p)) = settings.get_mut(*key) {
                    if !p.is_empty() && !p.starts_with('/') {
                        *p = base.join(&*p).display().to_string();
                    }
                }
            }
        }
        if let Some(toml::Value::String(p)) = s.get_mut("path") {
            if p.contains('/') && !p.starts_with('/') {
                *p = base.join(&*p).display().to_string();
            }
        }
        match s.get("dir").and_then(|d| d.as_str()).map(str::to_string) {
            Some(d) if !d.starts_with('/') => {
                s.insert("dir".into(), toml::Value::String(base.join(d).display().to_string()));
            }
            _ => {
                // The processes run where the file is, as with the core's own config.
                s.entry("dir").or_insert_with(|| toml::Value::String(base.display().to_string()));
            }
        }
    }
    serde_json::to_value(&items).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_files_become_json_with_absolute_paths() {
        let dir = std::env::temp_dir().join(format!("cumulo-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("svc.toml");
        std::fs::write(&f, "[[service]]\nprefix = \"/a/\"\npath = \"bin/x\"\ncount_process = 2\n[[service]]\nprefix = \"/b/\"\npath = \"sh\"\ndir = \"/tmp\"\n").unwrap();
        let v = services_from_toml_file(&f).unwrap();
        let base = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(v[0]["path"], base.join("bin/x").display().to_string());
        assert_eq!(v[0]["dir"], base.display().to_string());
        assert_eq!(v[0]["count_process"], 2);
        assert_eq!((v[1]["path"].as_str(), v[1]["dir"].as_str()), (Some("sh"), Some("/tmp")));
        std::fs::write(&f, "prefix = \"/one/\"\ninternal = \"echo\"\n").unwrap();
        assert_eq!(services_from_toml_file(&f).unwrap()[0]["internal"], "echo");
        let gateway = "prefix = \"/g/\"\ninternal = \"http\"\n[settings]\ntls_cert = \"c.pem\"\ntls_key = \"/k.pem\"\n";
        std::fs::write(&f, gateway).unwrap();
        let v = services_from_toml_file(&f).unwrap();
        assert_eq!(v[0]["settings"]["tls_cert"], base.join("c.pem").display().to_string());
        assert_eq!(v[0]["settings"]["tls_key"], "/k.pem");
        std::fs::write(&f, "[core]\n").unwrap();
        assert!(services_from_toml_file(&f).unwrap_err().contains("no [[service]]"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn update_needs_something_to_change() {
        let u = UpdateArgs {
            id: "1".into(),
            count_process: None,
            timeout_init: None,
            timeout_async: None,
            timeout_sync: None,
            timeout_terminate: None,
            queue_limit: None,
            queue_size: None,
            dest_refresh: None,
            max_r: None,
            max_t: None,
            restart_delay: None,
        };
        assert!(update_body(u).unwrap_err().contains("nothing to change"));
    }

    #[test]
    fn admin_address_from_flags_or_config() {
        let dir = std::env::temp_dir().join(format!("cumulo-cli-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(&f, "[admin]\naddress = \"0.0.0.0\"\nport = 9999\ntoken = \"tok\"\n").unwrap();
        let args = |admin: Option<&str>, config: Option<&Path>| AdminArgs {
            admin: admin.map(String::from),
            token: None,
            token_file: None,
            config: config.map(Path::to_path_buf),
            output: Output::Text,
        };
        assert_eq!(client(&args(None, Some(&f))).unwrap().url, "http://127.0.0.1:9999");
        assert_eq!(client(&args(Some("http://127.0.0.2:1"), Some(&f))).unwrap().url, "http://127.0.0.2:1");
        assert_eq!(client(&args(None, None)).unwrap().url, "http://127.0.0.1:7311");
        std::fs::write(&f, "[admin]\nport = 0\n").unwrap();
        assert!(client(&args(None, Some(&f))).err().unwrap().contains("no admin API"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
