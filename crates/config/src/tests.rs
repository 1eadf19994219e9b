use super::*;

/// A catalogue of two internal services: `echo`, whose one setting is
/// `pattern`, and `queue`, which needs a `[cluster]` section when its
/// settings say `backend = "jetstream"` (the binary's catalogue is tested
/// with the core: internal::settings).
const CATALOGUE: Catalogue = Catalogue {
    known: &["echo", "queue"],
    check: |name, settings| match settings.keys().find(|k| !(name == "echo" && *k == "pattern") && *k != "backend") {
        Some(k) => Err(format!("{name}: unknown setting '{k}'")),
        None => Ok(()),
    },
    needs_cluster: |name, settings| {
        (name == "queue" && settings.get("backend").and_then(|v| v.as_str()) == Some("jetstream"))
            .then_some("is a queue on JetStream: add a [cluster] section")
    },
    // A stand-in: echo's `pattern` taken as a file path.
    file_settings: |name| if name == "echo" { &["pattern"] } else { &[] },
};

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "test.toml", PathBuf::from("/etc/cumulo"), &CATALOGUE)
}

fn services_from_json(body: &[u8]) -> Result<Vec<ServiceConfig>, (String, String)> {
    super::services_from_json(body, &CATALOGUE, &Default::default())
}

#[test]
fn defaults_and_a_full_service() {
    let cfg = parse(
        r#"
        [core]
        socket = "run/c.sock"
        [[service]]
        prefix = "/tests/http_req/"
        path = "./http_req"
        count_process = 2
        count_thread = 3
        dest_refresh = "lazy_random"
        queue_limit = 10
        "#,
    )
    .unwrap();
    assert_eq!(cfg.socket_path(), PathBuf::from("/etc/cumulo/run/c.sock"));
    let s = &cfg.services[0];
    assert_eq!((s.count_process, s.count_thread, s.max_r, s.max_t), (2, 3, 5, 300));
    assert_eq!(s.options().dest_refresh, DestRefresh::LazyRandom);
    assert_eq!(s.options().timeout_sync, 5000);
    assert_eq!(cfg.core.max_frame, DEFAULT_MAX_FRAME);
    assert_eq!((cfg.core.hello_timeout, cfg.core.max_parked), (10_000, 10_000));
    assert_eq!(cfg.name_limits(), cumulo_pattern::NameLimits::default());
    assert_eq!(cfg.core.max_subscriptions, DEFAULT_MAX_SUBSCRIPTIONS);
}

#[test]
fn errors_name_the_file_field_and_reason() {
    let cases = [
        ("[[service]]\nprefix = \"nope\"\npath = \"x\"", "service[0] (nope).prefix", "start and end"),
        ("[[service]]\nprefix = \"/a/\"\npath = \"x\"\ncount_process = 0", "count_process", "1 .. 1024"),
        ("[[service]]\nprefix = \"/a/\"", "path", "give path"),
        ("[[service]]\nprefix = \"/a/\"\ninternal = \"nosuch\"", "internal", "unknown internal service"),
        ("[[service]]\nprefix = \"/a/\"\npath = \"x\"\ncolour = 1", "", "unknown field `colour`"),
        ("[[service]]\nprefix = \"/a/\"\npath = \"x\"\ndest_refresh = \"sometimes\"", "", "unknown variant"),
        ("[core]\nmax_frame = 10", "core.max_frame", "at least 1024"),
        ("[core]\nhello_timeout = 5", "core.hello_timeout", "at least 100 ms"),
        ("[core]\nmax_name = 10", "core.max_name", "64 .. 65535 bytes"),
        ("[core]\nmax_name = 70000", "core.max_name", "64 .. 65535 bytes"),
        ("[core]\nmax_pattern = 0", "core.max_pattern", "64 .. 65535 bytes"),
        ("[core]\nmax_wildcards = 0", "core.max_wildcards", "1 .. 256"),
        ("[core]\nmax_subscriptions = 0", "core.max_subscriptions", "at least 1"),
        ("[[service]]\nprefix = \"/a/**/\"\npath = \"x\"", "prefix", "two wildcards"),
    ];
    for (text, field, reason) in cases {
        let e = parse(text).unwrap_err();
        let shown = e.to_string();
        assert!(shown.starts_with("invalid config test.toml"), "{shown}");
        assert!(e.field.contains(field), "field {:?} for {text:?}: {shown}", e.field);
        assert!(shown.contains(reason), "{reason:?} not in {shown}");
    }
}

#[test]
fn admin_defaults_to_loopback_without_token() {
    let cfg = parse("").unwrap();
    assert_eq!(cfg.admin.address, "127.0.0.1");
    assert_eq!(cfg.admin.port, DEFAULT_ADMIN_PORT);
    assert!(cfg.admin.tokens.is_empty() && cfg.admin.enabled());
    assert!(!cfg.admin.port_set, "the default port was not asked for");
    let set = parse("[admin]\nport = 7311").unwrap().admin;
    assert!(set.port_set && set.port == DEFAULT_ADMIN_PORT, "the default port written in the file is asked for");
    assert!(!parse("[admin]\naddress = \"::1\"").unwrap().admin.port_set);
    assert!(!parse("[admin]\nport = 0").unwrap().admin.enabled());
    assert!(parse("[admin]\naddress = \"::1\"").is_ok());
}

#[test]
fn admin_off_loopback_needs_a_token() {
    let e = parse("[admin]\naddress = \"0.0.0.0\"").unwrap_err();
    assert_eq!(e.field, "admin.token");
    assert!(e.reason.contains("not a loopback address"), "{e}");
    let ok = parse("[admin]\naddress = \"0.0.0.0\"\ntoken = \"s3cret-t0ken\"").unwrap();
    assert_eq!(ok.admin.client_token(), Some("s3cret-t0ken"));
    assert_eq!((ok.admin.tokens[0].name.as_str(), ok.admin.tokens[0].role), ("admin", Role::Operate));
    // disabled: no listener, so no token needed
    assert!(parse("[admin]\naddress = \"0.0.0.0\"\nport = 0").is_ok());
    let cases = [
        ("[admin]\naddress = \"localhost\"", "admin.address", "not an IP address"),
        ("[admin]\ntoken = \"\"", "admin.token", "must not be empty"),
        ("[admin]\ntoken = \"two words\"", "admin.token", "without spaces"),
        ("[admin]\nport = 70000", "", "invalid value"),
        ("[admin]\nhost = \"x\"", "", "unknown field `host`"),
    ];
    for (text, field, reason) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.field, field, "{text}: {e}");
        assert!(e.to_string().contains(reason), "{reason:?} not in {e}");
    }
}

/// A folder of its own under the temporary one, for token files.
fn token_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cumulo-config-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_secret(path: &Path, text: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn admin_tokens_with_roles_written_or_in_files() {
    let dir = token_dir("roles");
    write_secret(&dir.join("grafana.token"), "read-secret\n", 0o600);
    write_secret(&dir.join("ops.token"), "ops-secret", 0o400);
    let text = r#"
        [admin]
        address = "0.0.0.0"
        token_file = "ops.token"
        [[admin.tokens]]
        name = "grafana"
        role = "read"
        token_file = "grafana.token"
        [[admin.tokens]]
        name = "deploy"
        role = "operate"
        token = "deploy-secret"
        "#;
    let cfg = Config::parse(text, "t.toml", dir.clone(), &CATALOGUE).unwrap();
    let got: Vec<_> = cfg.admin.tokens.iter().map(|t| (t.name.as_str(), t.role, t.secret.as_str())).collect();
    assert_eq!(
        got,
        [
            ("admin", Role::Operate, "ops-secret"),
            ("grafana", Role::Read, "read-secret"),
            ("deploy", Role::Operate, "deploy-secret")
        ]
    );
    assert_eq!(cfg.admin.client_token(), Some("ops-secret"), "an operate token first");
    // only read tokens off loopback: accepted (nobody can change anything)
    let read_only = "[admin]\naddress = \"0.0.0.0\"\n[[admin.tokens]]\nname = \"g\"\nrole = \"read\"\ntoken = \"r\"\n";
    let cfg = parse(read_only).unwrap();
    assert_eq!((cfg.admin.tokens.len(), cfg.admin.client_token()), (1, Some("r")), "else a read one");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn admin_token_files_missing_empty_or_open_to_others_are_refused() {
    let dir = token_dir("files");
    write_secret(&dir.join("open.token"), "s3cret", 0o644);
    write_secret(&dir.join("group.token"), "s3cret", 0o620);
    write_secret(&dir.join("empty.token"), "\n", 0o600);
    let cases = [
        ("token_file = \"open.token\"", "admin.token_file", "open to other users (mode 644)"),
        ("token_file = \"group.token\"", "admin.token_file", "chmod 600"),
        ("token_file = \"empty.token\"", "admin.token_file", "is empty"),
        ("token_file = \"missing.token\"", "admin.token_file", "cannot read the token file"),
        ("token = \"x\"\ntoken_file = \"empty.token\"", "admin.token", "not both"),
        ("[[admin.tokens]]\nname = \"g\"\nrole = \"read\"\ntoken_file = \"open.token\"", "admin.tokens[0].token_file", "mode 644"),
        ("[[admin.tokens]]\nname = \"g\"\nrole = \"read\"", "admin.tokens[0].token", "give token or token_file"),
        ("[[admin.tokens]]\nname = \"g\"\nrole = \"admin\"\ntoken = \"x\"", "", "unknown variant `admin`"),
        ("[[admin.tokens]]\nname = \"g\"\ntoken = \"x\"", "", "missing field `role`"),
        ("[[admin.tokens]]\nname = \"two words\"\nrole = \"read\"\ntoken = \"x\"", "admin.tokens[0].name", "without spaces"),
        (
            "token = \"x\"\n[[admin.tokens]]\nname = \"g\"\nrole = \"read\"\ntoken = \"x\"",
            "admin.tokens[0].token",
            "the same token as admin",
        ),
        (
            "[[admin.tokens]]\nname = \"g\"\nrole = \"read\"\ntoken = \"x\"\n[[admin.tokens]]\nname = \"g\"\nrole = \"read\"\ntoken = \"y\"",
            "admin.tokens[1].name",
            "also the name of admin.tokens[0]",
        ),
    ];
    for (keys, field, reason) in cases {
        let text = format!("[admin]\n{keys}\n");
        let e = Config::parse(&text, "t.toml", dir.clone(), &CATALOGUE).unwrap_err();
        assert_eq!(e.field, field, "{keys}: {e}");
        assert!(e.to_string().contains(reason), "{reason:?} not in {e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn internal_settings_are_checked_with_the_file() {
    let e = parse("[[service]]\nprefix = \"/e/\"\ninternal = \"echo\"\nsettings = { colour = 1 }").unwrap_err();
    assert_eq!(e.field, "service[0] (/e/).settings");
    assert!(e.reason.contains("unknown setting 'colour'"), "{e}");
}

#[test]
fn services_from_json_one_or_many_checked_like_the_file() {
    let one = services_from_json(br#"{"prefix": "/a/", "path": "x", "count_process": 3}"#).unwrap();
    assert_eq!((one.len(), one[0].count_process, one[0].count_thread), (1, 3, 1));
    let many = services_from_json(
        br#"[{"prefix": "/a/", "path": "x"}, {"prefix": "/e/", "internal": "echo", "settings": {"pattern": "x/*"}}]"#,
    )
    .unwrap();
    assert_eq!(many[1].internal.as_deref(), Some("echo"));
    assert_eq!(many[1].settings.get("pattern").and_then(|v| v.as_str()), Some("x/*"));
    let cases: [(&[u8], &str, &str); 7] = [
        (b"nope", "", "not valid JSON"),
        (b"3", "", "expected a service"),
        (b"[]", "", "empty"),
        (br#"{"prefix": "/a/", "path": "x", "colour": 1}"#, "service[0]", "unknown field `colour`"),
        (br#"{"prefix": "/a/", "path": "x", "count_process": "2"}"#, "service[0]", "invalid type"),
        (
            br#"[{"prefix": "/a/", "path": "x"}, {"prefix": "/b/", "path": "x", "max_t": 0}]"#,
            "service[1] (/b/).max_t",
            "at least 1",
        ),
        (br#"{"prefix": "a", "path": "x"}"#, "service[0] (a).prefix", "start and end"),
    ];
    for (body, field, reason) in cases {
        let (f, r) = services_from_json(body).unwrap_err();
        assert_eq!(f, field, "{}", String::from_utf8_lossy(body));
        assert!(r.contains(reason), "{reason:?} not in {r:?}");
    }
}

/// The keys serde knows for a table, read off its "unknown field" error
/// (it lists every field it expected), so the check below needs no list of
/// its own that could drift too.
fn known_keys(table: &str) -> Vec<String> {
    let body = if table == "[[service]]" { "prefix = \"/a/\"\npath = \"x\"\n" } else { "" };
    let probe = format!("{table}\n{body}zz_not_a_key = 1\n");
    let e = parse(&probe).expect_err("an unknown key is refused").reason;
    let listed = e.split_once("expected").unwrap_or_else(|| panic!("{table}: no key list in {e:?}")).1;
    listed.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// Every documented table of docs/CONFIG.md with the keys its rows name:
/// headings "## `[core]`", rows "| `key` | ..." or "| `key`, `other` | ...", a sub-table row
/// "| `[core.unmanaged]` |" naming key `unmanaged`.
fn documented_tables() -> Vec<(String, Vec<String>)> {
    let doc = include_str!("../../../docs/CONFIG.md");
    let mut tables: Vec<(String, Vec<String>)> = Vec::new();
    for line in doc.lines() {
        if let Some(h) = line.strip_prefix("## `") {
            let name = h.trim_end_matches('`');
            if name.starts_with('[') {
                tables.push((name.to_string(), Vec::new()));
                continue;
            }
        }
        if line.starts_with("## ") {
            tables.push((String::new(), Vec::new())); // a section that is not a table
            continue;
        }
        let (Some(row), Some((_, keys))) = (line.strip_prefix("| `"), tables.last_mut()) else { continue };
        // The first cell may name several keys: "| `user`, `password` |".
        let cell = row.split(" |").next().unwrap_or_default();
        for key in cell.split('`').step_by(2) {
            let key = key.trim_matches(|c| c == '[' || c == ']');
            let key = key.rsplit('.').next().unwrap_or(key);
            keys.push(key.to_string());
        }
    }
    tables.retain(|(name, _)| !name.is_empty());
    tables
}

#[test]
fn config_md_documents_every_key_and_names_no_other() {
    let tables = documented_tables();
    assert!(tables.len() >= 3, "CONFIG.md tables not found: {tables:?}");
    for (table, documented) in &tables {
        let known = known_keys(table);
        for key in documented {
            assert!(known.contains(key), "docs/CONFIG.md {table} documents `{key}`, which the config does not have");
        }
        for key in &known {
            assert!(documented.contains(key), "{table} key `{key}` is not documented in docs/CONFIG.md");
        }
    }
}

/// Keys written as `table.key` anywhere in the docs (`core.max_frame`) exist.
#[test]
fn keys_named_in_the_docs_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.extend([root.join("proto/PROTOCOL.md"), root.join("README.md")]);
    let tables: Vec<(String, Vec<String>)> = documented_tables()
        .into_iter()
        .filter(|(t, _)| !t.starts_with("[["))
        .map(|(t, _)| (t.trim_matches(|c| c == '[' || c == ']').to_string(), known_keys(&t)))
        .collect();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for quoted in text.split('`').skip(1).step_by(2) {
            // OpenTelemetry's attribute names (docs/TRACING.md), not keys.
            if ["service.name", "url.path", "client.address", "cumulo.node"].contains(&quoted) {
                continue;
            }
            let Some((table, key)) = quoted.split_once('.') else { continue };
            if table == "settings" {
                continue; // an internal service's setting, checked by its crate
            }
            let key = key.split([' ', '=']).next().unwrap_or_default();
            if !key.chars().all(|c| c.is_ascii_lowercase() || c == '_') || key.is_empty() {
                continue;
            }
            match tables.iter().find(|(t, _)| t == table) {
                Some((_, known)) => {
                    assert!(known.contains(&key.to_string()), "{}: `{quoted}` names no config key", file.display())
                }
                // A key of one table written under a name that is no table
                // (`listener.allow_unmanaged` for `core.allow_unmanaged`).
                None => assert!(
                    !tables.iter().any(|(_, known)| known.contains(&key.to_string())),
                    "{}: `{quoted}`: there is no table `{table}`",
                    file.display()
                ),
            }
        }
    }
}

#[test]
fn no_cluster_section_is_a_single_node() {
    assert!(parse("").unwrap().cluster.is_none());
}

#[test]
fn cluster_section_defaults_and_names() {
    let cfg = parse("[cluster]\nservers = [\"nats://127.0.0.1:4222\", \"nats://127.0.0.1:4223\"]\n").unwrap();
    let c = cfg.cluster.unwrap();
    assert_eq!((c.name.as_str(), c.heartbeat_ms, c.purge_ms), ("default", 500, 3000));
    assert_eq!(c.servers.len(), 2);
    // the default node name: host name, ':' and the admin port, a valid subject token
    let name = c.node_name(7311);
    assert!(name.ends_with(":7311") && cluster::valid_name(&name), "{name}");
    let cfg = parse("[cluster]\nnode = \"b\"\nservers = [\"nats://h:1\"]\nname = \"prod\"\ncreds_file = \"n.creds\"\n")
        .unwrap();
    let c = cfg.cluster.unwrap();
    assert_eq!((c.node_name(1), c.name.as_str()), ("b".to_string(), "prod"));
    assert_eq!(c.creds_file.unwrap(), PathBuf::from("/etc/cumulo/n.creds"), "paths are relative to the file");
}

#[test]
fn cluster_errors_name_the_field() {
    let ok = "servers = [\"nats://127.0.0.1:4222\"]";
    let cases = [
        ("[cluster]\nnode = \"a\"".to_string(), "cluster.servers", "one or more NATS servers"),
        ("[cluster]\nservers = []".to_string(), "cluster.servers", "one or more"),
        ("[cluster]\nservers = [\"nats://[::1\"]".to_string(), "cluster.servers", "not a NATS server address"),
        (format!("[cluster]\n{ok}\nnode = \"a.b\""), "cluster.node", "subject token"),
        (format!("[cluster]\n{ok}\nname = \"x y\""), "cluster.name", "subject token"),
        (format!("[cluster]\n{ok}\nname = \"\""), "cluster.name", "subject token"),
        (format!("[cluster]\n{ok}\nheartbeat_ms = 1"), "cluster.heartbeat_ms", "at least 10 ms"),
        (format!("[cluster]\n{ok}\nheartbeat_ms = 500\npurge_ms = 600"), "cluster.purge_ms", "twice heartbeat_ms"),
        (format!("[cluster]\n{ok}\npassword = \"p\""), "cluster.password", "give user"),
        (format!("[cluster]\n{ok}\nuser = \"u\"\ntoken = \"t\""), "cluster.token", "not both"),
        (format!("[cluster]\n{ok}\ntls_cert_file = \"c.pem\""), "cluster.tls_cert_file", "go together"),
        (format!("[cluster]\n{ok}\nport = 4"), "", "unknown field `port`"),
    ];
    for (text, field, reason) in cases {
        let e = parse(&text).unwrap_err();
        let shown = e.to_string();
        assert!(e.field.contains(field), "field {:?} for {text:?}: {shown}", e.field);
        assert!(shown.contains(reason), "{reason:?} not in {shown}");
    }
}

#[test]
fn byte_limits_on_waiting_requests_have_defaults_and_are_checked() {
    let cfg = parse("[[service]]\nprefix = \"/a/\"\npath = \"a\"\nqueue_size = 2048\n").unwrap();
    assert_eq!(cfg.services[0].options().queue_size, 2048);
    assert_eq!(cfg.core.unmanaged.queue_size, DEFAULT_QUEUE_SIZE);
    assert_eq!((cfg.core.max_queued_bytes, cfg.core.max_sender_queued_bytes), (256 << 20, 64 << 20));
    let bad = |text: &str, field: &str| {
        let e = parse(text).unwrap_err();
        assert!(e.field.contains(field), "{text}: {e}");
    };
    bad("[[service]]\nprefix = \"/a/\"\npath = \"a\"\nqueue_size = 1000\n", "queue_size");
    bad("[core]\nmax_sender_queued_bytes = 1024\n", "core.max_sender_queued_bytes");
    bad("[core]\nmax_queued_bytes = 1048576\n", "core.max_queued_bytes");
}

#[test]
fn node_aware_dest_refresh_values_parse() {
    for v in [
        "immediate_closest",
        "lazy_closest",
        "immediate_furthest",
        "lazy_furthest",
        "immediate_local",
        "lazy_local",
        "immediate_remote",
        "lazy_remote",
        "immediate_random",
        "lazy_random",
        "immediate_newest",
        "lazy_newest",
        "immediate_oldest",
        "lazy_oldest",
        "round_robin",
        "least_busy",
        "none",
    ] {
        parse(&format!("[core.unmanaged]\ndest_refresh = \"{v}\"")).unwrap_or_else(|e| panic!("{v}: {e}"));
    }
}

#[test]
fn a_service_that_needs_a_cluster_is_refused_without_one() {
    let text = "[[service]]\nprefix = \"/q/\"\ninternal = \"queue\"\nsettings = { backend = \"jetstream\" }";
    let e = parse(text).unwrap_err();
    assert_eq!(e.field, "cluster.servers");
    assert!(e.reason.starts_with("service[0] (/q/) is a queue on JetStream"), "{e}");
    let with = format!("{text}\n[cluster]\nservers = [\"nats://127.0.0.1:4222\"]");
    assert!(parse(&with).is_ok());
    assert!(parse("[[service]]\nprefix = \"/q/\"\ninternal = \"queue\"").is_ok());
}

#[test]
fn acl_groups_expand_into_each_list() {
    let cfg = parse(
        r#"
        [acl]
        stores = ["/db/*", "caches"]
        caches = ["/cache/*", "/db/*"]
        [[service]]
        prefix = "/a/"
        path = "x"
        dest_list_allow = ["stores", "/public/*"]
        dest_list_deny = ["/db/admin/*"]
        [core.unmanaged]
        dest_list_deny = ["caches"]
        "#,
    )
    .unwrap();
    let s = &cfg.services[0];
    assert_eq!(s.dest_list_allow.as_deref().unwrap(), ["/db/*", "/cache/*", "/public/*"], "in order, once each");
    assert_eq!(s.options().dest_list_deny, ["/db/admin/*"]);
    assert_eq!(cfg.core.unmanaged.dest_list_deny, ["/cache/*", "/db/*"]);
    assert_eq!(cfg.core.tcp_anonymous, Anonymous::Refuse);
    assert_eq!(cfg.core.unix_anonymous, Anonymous::Any);
}

#[test]
fn bad_acl_entries_are_refused_with_their_field() {
    let refused = |text: &str| {
        let e = parse(text).unwrap_err();
        (e.field, e.reason)
    };
    let (f, r) = refused("[[service]]\nprefix = \"/a/\"\npath = \"x\"\ndest_list_allow = [\"nosuch\"]\n");
    assert_eq!(f, "service[0] (/a/).dest_list_allow");
    assert!(r.contains("neither a pattern") && r.contains("known: none"), "{r}");
    let (f, r) = refused("[acl]\na = [\"b\"]\nb = [\"a\"]\n");
    assert_eq!(f, "acl.a");
    assert!(r.contains("names itself"), "{r}");
    let (f, _) = refused("[acl]\na = [\"/x/**\"]\n");
    assert_eq!(f, "acl.a");
}

#[test]
fn clients_need_a_name_a_token_and_prefixes() {
    let client = |body: &str| parse(&format!("[[client]]\n{body}\n"));
    let ok = client("name = \"t\"\ntoken = \"0123456789abcdef\"\nprefixes = [\"/t/\"]\ndest_list_allow = [\"/e/*\"]");
    let cfg = ok.unwrap();
    assert_eq!(cfg.clients[0].secret(), "0123456789abcdef");
    for (body, field, why) in [
        ("name = \"t\"\nprefixes = [\"/t/\"]", "client[0] (t).token", "give token or token_file"),
        ("name = \"t\"\ntoken = \"short\"\nprefixes = [\"/t/\"]", "client[0] (t).token", "at least 16 bytes"),
        ("name = \"t\"\ntoken = \"0123456789abcdef\"", "client[0] (t).prefixes", "at least one prefix"),
        ("name = \"t\"\ntoken = \"0123456789abcdef\"\nprefixes = [\"t/\"]", "client[0] (t).prefixes", "start and end"),
        ("name = \"a b\"\ntoken = \"0123456789abcdef\"\nprefixes = [\"/t/\"]", "client[0] (a b).name", "letters"),
        (
            "name = \"t\"\ntoken_file = \"/nonexistent/t.token\"\nprefixes = [\"/t/\"]",
            "client[0] (t).token_file",
            "cannot read",
        ),
    ] {
        let e = client(body).unwrap_err();
        assert_eq!(e.field, field, "{body}");
        assert!(e.reason.contains(why), "{body}: {}", e.reason);
    }
    let two = "[[client]]\nname = \"a\"\ntoken = \"0123456789abcdef\"\nprefixes = [\"/t/\"]\n\
               [[client]]\nname = \"b\"\ntoken = \"0123456789abcdef\"\nprefixes = [\"/u/\"]\n";
    assert!(parse(two).unwrap_err().reason.contains("same token"));
}

#[test]
fn file_settings_of_internal_services_are_relative_to_the_file() {
    let text = "[[service]]\nprefix = \"/a/\"\ninternal = \"echo\"\nsettings = { pattern = \"certs/c.pem\" }\n\
[[service]]\nprefix = \"/b/\"\ninternal = \"echo\"\nsettings = { pattern = \"/abs/c.pem\" }";
    let c = Config::parse(text, "t.toml", "/etc/cumulo".into(), &CATALOGUE).unwrap();
    assert_eq!(c.services[0].settings["pattern"].as_str(), Some("/etc/cumulo/certs/c.pem"));
    assert_eq!(c.services[1].settings["pattern"].as_str(), Some("/abs/c.pem"));
}

#[test]
fn policies_are_read_with_their_defaults() {
    let cfg = parse(
        "[[policy]]\nname = \"pay\"\ndestinations = [\"/pay/*\"]\ntimeout_ms = 2000\n\
         [policy.retry]\nmax_retries = 2\n[policy.circuit_breaker]\n[policy.outlier]\n",
    )
    .unwrap();
    let p = &cfg.policies[0];
    assert_eq!((p.name.as_str(), p.timeout_ms), ("pay", 2000));
    let r = p.retry.as_ref().unwrap();
    assert_eq!((r.max_retries, r.interval_ms, r.on.clone()), (2, 20, vec!["NO_SERVICE".into(), "QUEUE_FULL".into()]));
    assert_eq!(p.circuit_breaker.as_ref().unwrap().consecutive_failures, 5);
    assert_eq!(p.outlier.as_ref().unwrap().max_ejected_share, 0.5);
}

#[test]
fn bad_policies_are_refused_with_their_field() {
    let refused = |text: &str| parse(text).unwrap_err().to_string();
    let head = "[[policy]]\nname = \"p\"\ndestinations = [\"/p/*\"]\n";
    for (extra, field, why) in [
        ("[policy.retry]\njitter = 1.5\n", "policy[0].retry.jitter", "must be 0 .. 1"),
        ("[policy.retry]\non = [\"OK\"]\n", "policy[0].retry.on", "'OK' is not a status"),
        ("[policy.retry]\nmax_retries = 100\n", "policy[0].retry.max_retries", "must be 1 .. 16"),
        ("[policy.circuit_breaker]\nconsecutive_failures = 0\n", "policy[0].circuit_breaker", "give consecutive"),
        ("[policy.outlier]\nmax_ejected_share = 0.0\n", "policy[0].outlier.max_ejected_share", "more than 0"),
        ("", "policy[0].name", "does nothing"),
    ] {
        let e = refused(&format!("{head}{extra}"));
        assert!(e.contains(&format!("test.toml: {field}: ")) && e.contains(why), "{extra}: {e}");
    }
    let e = refused("[[policy]]\nname = \"p\"\ndestinations = [\"/p/**\"]\ntimeout_ms = 5\n");
    assert!(e.contains("policy[0].destinations"), "{e}");
    let e = refused(&format!("{head}timeout_ms = 5\n{head}timeout_ms = 5\n"));
    assert!(e.contains("policy[1].name: 'p' names two policies"), "{e}");
    let e = refused("[[policy]]\nname = \"p\"\ndestinations = [\"/p/*\"]\nretries = 3\n");
    assert!(e.contains("unknown field `retries`"), "{e}");
}

#[test]
fn policies_from_the_admin_api_are_checked_as_a_files_are() {
    let ok = br#"[{"name": "p", "destinations": ["/p/*"], "retry": {"max_retries": 2}}]"#;
    assert_eq!(policy::from_json(ok).unwrap()[0].retry.as_ref().unwrap().max_retries, 2);
    let wrapped = br#"{"policies": [{"name": "p", "destinations": ["/p/*"], "timeout_ms": 10}]}"#;
    assert_eq!(policy::from_json(wrapped).unwrap()[0].timeout_ms, 10);
    let (field, why) =
        policy::from_json(br#"[{"name": "p", "destinations": ["/p/*"], "retry": {"jitter": 2}}]"#).unwrap_err();
    assert_eq!(
        (field.as_str(), why.as_str()),
        ("policies[0].retry.jitter", "must be 0 .. 1 (a share of the interval)")
    );
    assert!(policy::from_json(b"{").is_err());
}

#[test]
fn health_probes_are_checked() {
    let svc = "[[service]]\nprefix = \"/s/\"\npath = \"x\"\n[service.health]\n";
    assert_eq!(parse(&format!("{svc}interval_ms = 2000\n")).unwrap().services[0].health.as_ref().unwrap().threshold, 3);
    let e = parse(&format!("{svc}pattern = \"h*\"\n")).unwrap_err().to_string();
    assert!(e.contains("service[0] (/s/).health.pattern: must be a name"), "{e}");
    let e = parse(&format!("{svc}timeout_ms = 6000\n")).unwrap_err().to_string();
    assert!(e.contains("health.timeout_ms"), "{e}");
}
