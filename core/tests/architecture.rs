//! The manifests are the architecture (docs/ARCHITECTURE.md, "Crates"):
//! checked on the resolved dependency graph (`cargo metadata`), so a
//! dependency added to a manifest, directly or through another crate, fails
//! here naming the rule it breaks.
//!
//! - Each crate of cumulo may depend on exactly the cumulo crates its row of
//!   [`ALLOWED`] names; a new edge is a design decision made here first.
//! - Libraries of one concern stay in their crate ([`CONFINED`]): no crate
//!   outside the list reaches hyper, async-nats or tungstenite.
//! - `unsafe` is allowed in one module of the workspace (cumulo-sys's
//!   `os.rs`); every other crate's sources never allow it.
//! - One module-file style: a module with children is `x/mod.rs`.
//! - The crate graph at the top of docs/ARCHITECTURE.md is the one the
//!   manifests give: it is generated here, and this test fails when the
//!   document differs (with `CUMULO_BLESS=1`, it writes it).

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every crate of cumulo (not the SDKs, examples, benchmarks or test
/// harnesses) and the cumulo crates it may depend on, directly.
const ALLOWED: &[(&str, &[&str])] = &[
    ("cumulo-proto", &[]),
    ("cumulo-sys", &[]),
    ("cumulo-pattern", &[]),
    ("cumulo-wal", &[]),
    // Server-side TLS: certificates, their reload, the acceptor.
    ("cumulo-tls", &[]),
    ("cumulo-config", &["cumulo-pattern", "cumulo-proto"]),
    // Trace context and span records; no exporter (that is cumulo-otlp).
    ("cumulo-trace", &["cumulo-proto"]),
    ("cumulo-service", &["cumulo-proto", "cumulo-trace"]),
    // The span exporter: OTLP/HTTP off the event loops.
    ("cumulo-otlp", &["cumulo-config", "cumulo-trace"]),
    // The rules of resiliency policies: pure, no routing state.
    ("cumulo-resilience", &["cumulo-config", "cumulo-pattern", "cumulo-proto"]),
    (
        "cumulo-router",
        &[
            "cumulo-config",
            "cumulo-pattern",
            "cumulo-proto",
            "cumulo-resilience",
            "cumulo-service",
            "cumulo-sys",
            "cumulo-trace",
        ],
    ),
    ("cumulo-queue", &["cumulo-service", "cumulo-wal"]),
    ("cumulo-queue-jetstream", &["cumulo-queue", "cumulo-service"]),
    ("cumulo-loadgen", &["cumulo-proto", "cumulo-service", "cumulo-sys"]),
    ("cumulo-filesystem", &["cumulo-proto", "cumulo-service"]),
    ("cumulo-bridge", &["cumulo-service"]),
    ("cumulo-http-client", &["cumulo-service"]),
    ("cumulo-health-check", &["cumulo-http-client", "cumulo-service"]),
    ("cumulo-cron", &["cumulo-service"]),
    ("cumulo-chaos", &["cumulo-service"]),
    ("cumulo-cluster", &["cumulo-config", "cumulo-proto", "cumulo-router"]),
    // A node's runtime: the listener, the supervisor, CloudI's protocol,
    // the shards, InternalApi. No HTTP, NATS or WebSocket (CONFINED).
    ("cumulo-node", &["cumulo-config", "cumulo-proto", "cumulo-router", "cumulo-service", "cumulo-sys", "cumulo-tls"]),
    // The HTTP gateway: the core through the service API only.
    ("cumulo-gateway", &["cumulo-filesystem", "cumulo-proto", "cumulo-service", "cumulo-sys", "cumulo-tls"]),
    // The admin API: the operator's door over the node, the router's state,
    // the cluster's members and what the gateway and TLS count.
    (
        "cumulo-admin",
        &[
            "cumulo-cluster",
            "cumulo-config",
            "cumulo-gateway",
            "cumulo-node",
            "cumulo-router",
            "cumulo-service",
            "cumulo-sys",
            "cumulo-tls",
        ],
    ),
    (
        "cumulo",
        &[
            "cumulo-admin",
            "cumulo-bridge",
            "cumulo-chaos",
            "cumulo-cluster",
            "cumulo-config",
            "cumulo-cron",
            "cumulo-filesystem",
            "cumulo-gateway",
            "cumulo-health-check",
            "cumulo-http-client",
            "cumulo-loadgen",
            "cumulo-node",
            "cumulo-otlp",
            "cumulo-pattern",
            "cumulo-proto",
            "cumulo-queue",
            "cumulo-queue-jetstream",
            "cumulo-router",
            "cumulo-tls",
        ],
    ),
];

/// Libraries of one concern, and the crates allowed to reach them (through
/// any path). The router's hot path must not reach them at all.
const CONFINED: &[(&str, &[&str])] = &[
    // HTTP: the gateway, the admin API, the CLI (in the binary), the load
    // generator's HTTP client, the http_client service, and health_check
    // through the http_client library (it names no HTTP library itself).
    (
        "hyper",
        &[
            "cumulo",
            "cumulo-admin",
            "cumulo-gateway",
            "cumulo-health-check",
            "cumulo-http-client",
            "cumulo-loadgen",
            "cumulo-otlp",
        ],
    ),
    // OpenTelemetry: the exporter alone (and the binary that starts it);
    // the router records plain spans (cumulo-trace).
    ("opentelemetry", &["cumulo", "cumulo-otlp"]),
    ("opentelemetry_sdk", &["cumulo", "cumulo-otlp"]),
    // NATS: the cluster and the queue's JetStream backend (and the binary
    // that wires them, and the admin API, which reads the cluster's members).
    ("async-nats", &["cumulo", "cumulo-admin", "cumulo-cluster", "cumulo-queue-jetstream"]),
    // WebSocket: the gateway (and the binary that wires it, and the admin
    // API, which lists and closes the gateway's WebSockets through it).
    ("tungstenite", &["cumulo", "cumulo-admin", "cumulo-gateway"]),
    ("tokio-tungstenite", &["cumulo", "cumulo-admin", "cumulo-gateway"]),
];

struct Graph {
    /// name -> names of its normal (not dev, not build) dependencies.
    deps: BTreeMap<String, BTreeSet<String>>,
    /// name -> the folder of its manifest, for workspace members.
    dirs: BTreeMap<String, PathBuf>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("-vV").output().expect("run rustc -vV");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").trim().to_string()
}

fn graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        // This platform's graph, from what the build already fetched.
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", &host_triple()])
        .arg("--manifest-path")
        .arg(root().join("Cargo.toml"))
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let members: BTreeSet<&str> =
        v["workspace_members"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    let mut name_of = BTreeMap::new();
    let mut dirs = BTreeMap::new();
    for p in v["packages"].as_array().unwrap() {
        let (id, name) = (p["id"].as_str().unwrap(), p["name"].as_str().unwrap());
        name_of.insert(id, name);
        if members.contains(id) {
            let manifest = Path::new(p["manifest_path"].as_str().unwrap());
            dirs.insert(name.to_string(), manifest.parent().unwrap().to_path_buf());
        }
    }
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in v["resolve"]["nodes"].as_array().unwrap() {
        let name = name_of[node["id"].as_str().unwrap()].to_string();
        let normal = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()))
            .map(|d| name_of[d["pkg"].as_str().unwrap()].to_string());
        deps.entry(name).or_default().extend(normal);
    }
    Graph { deps, dirs }
}

impl Graph {
    fn closure(&self, root: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.to_string()];
        while let Some(n) = todo.pop() {
            for d in self.deps.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    }

    /// The cumulo crates `name` depends on directly.
    fn cumulo_deps(&self, name: &str) -> BTreeSet<String> {
        self.deps[name].iter().filter(|d| ALLOWED.iter().any(|(c, _)| c == *d)).cloned().collect()
    }
}

#[test]
fn each_crate_depends_on_exactly_the_cumulo_crates_the_design_allows() {
    let g = graph();
    let mut wrong = vec![];
    for (name, allowed) in ALLOWED {
        assert!(g.deps.contains_key(*name), "{name} is not in the workspace");
        let has = g.cumulo_deps(name);
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        if has != allowed {
            wrong.push(format!(
                "{name}: depends on {has:?}, the design allows {allowed:?} (extra: {:?}, missing: {:?})",
                has.difference(&allowed).collect::<Vec<_>>(),
                allowed.difference(&has).collect::<Vec<_>>()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}\n(the rules: core/tests/architecture.rs, docs/ARCHITECTURE.md)", wrong.join("\n"));
    // Every crate under crates/ has a row: a new crate is placed on purpose.
    for (name, dir) in &g.dirs {
        if dir.starts_with(root().join("crates")) {
            assert!(ALLOWED.iter().any(|(c, _)| c == name), "{name} ({}) has no row in ALLOWED", dir.display());
        }
    }
}

#[test]
fn http_nats_and_websocket_libraries_stay_in_their_crates() {
    let g = graph();
    let mut wrong = vec![];
    for (name, _) in ALLOWED {
        let reach = g.closure(name);
        for (lib, allowed) in CONFINED {
            if reach.contains(*lib) && !allowed.contains(name) {
                wrong.push(format!("{name} reaches {lib}, which only {allowed:?} may use"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The rules see real edges: the crates allowed a library do reach it.
    assert!(g.closure("cumulo").contains("hyper") && g.closure("cumulo-queue-jetstream").contains("async-nats"));
}

/// Rust sources under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn unsafe_is_allowed_in_one_module_of_the_workspace() {
    let g = graph();
    let mut allowing = vec![];
    for (name, _) in ALLOWED {
        let mut files = vec![];
        sources(&g.dirs[*name].join("src"), &mut files);
        assert!(!files.is_empty(), "{name} has sources");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if compact.contains("allow(unsafe_code") || compact.contains("allow(unsafe_code,") {
                allowing.push(f.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    assert_eq!(allowing, ["crates/sys/src/os.rs"], "only cumulo-sys's os.rs may allow unsafe");
}

#[test]
fn one_module_file_style_throughout() {
    // A module with children is `x/mod.rs`, never `x.rs` beside a folder `x/`.
    let g = graph();
    let mut mixed = vec![];
    for (name, _) in ALLOWED {
        let mut files = vec![];
        sources(&g.dirs[*name].join("src"), &mut files);
        for f in files {
            if f.with_extension("").is_dir() {
                mixed.push(f.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    assert!(mixed.is_empty(), "modules with a folder beside them (make them x/mod.rs): {mixed:?}");
}

const BEGIN: &str = "<!-- crate graph: generated by core/tests/architecture.rs from the manifests -->";
const END: &str = "<!-- end of crate graph -->";

/// One line per crate: the crate, its folder, and the cumulo crates it
/// depends on; then the libraries of one concern and who reaches them.
fn rendered(g: &Graph) -> String {
    let mut s = String::from("```\n");
    let width = ALLOWED
        .iter()
        .map(|(n, _)| n.len() + g.dirs[*n].strip_prefix(root()).unwrap().as_os_str().len() + 3)
        .max()
        .unwrap();
    for (name, _) in ALLOWED {
        let dir = g.dirs[*name].strip_prefix(root()).unwrap().display().to_string();
        let deps: Vec<String> = g.cumulo_deps(name).into_iter().collect();
        let head = format!("{name} ({dir})");
        let tail = if deps.is_empty() { "(no cumulo crate)".to_string() } else { deps.join(", ") };
        s.push_str(&format!("{head:width$} ──► {tail}\n"));
    }
    s.push('\n');
    for (lib, _) in CONFINED {
        let reach: Vec<&str> = ALLOWED.iter().map(|(n, _)| *n).filter(|n| g.closure(n).contains(*lib)).collect();
        s.push_str(&format!("{lib} is reached by: {}\n", reach.join(", ")));
    }
    s.push_str("```\n");
    s
}

#[test]
fn the_crate_graph_in_the_architecture_document_is_the_manifests() {
    let g = graph();
    let want = rendered(&g);
    let path = root().join("docs/ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("docs/ARCHITECTURE.md has no {BEGIN} ... {END} block");
    };
    let have = &doc[b + BEGIN.len()..e];
    let have = have.trim_start_matches('\n');
    if have != want {
        if std::env::var_os("CUMULO_BLESS").is_some() {
            let new = format!("{}{BEGIN}\n{want}{}", &doc[..b], &doc[e..]);
            std::fs::write(&path, new).unwrap();
            return;
        }
        panic!(
            "docs/ARCHITECTURE.md's crate graph differs from the manifests; it should read:\n{want}\n\
             (CUMULO_BLESS=1 cargo test -p cumulo --test architecture writes it)"
        );
    }
}
