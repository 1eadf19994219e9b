use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "test.toml", PathBuf::from("/etc/cumulo"))
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
    assert!(cfg.admin.token.is_none() && cfg.admin.enabled());
    assert!(!parse("[admin]\nport = 0").unwrap().admin.enabled());
    assert!(parse("[admin]\naddress = \"::1\"").is_ok());
}

#[test]
fn admin_off_loopback_needs_a_token() {
    let e = parse("[admin]\naddress = \"0.0.0.0\"").unwrap_err();
    assert_eq!(e.field, "admin.token");
    assert!(e.reason.contains("not a loopback address"), "{e}");
    let ok = parse("[admin]\naddress = \"0.0.0.0\"\ntoken = \"s3cret-t0ken\"").unwrap();
    assert_eq!(ok.admin.token.as_deref(), Some("s3cret-t0ken"));
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
    let many =
        services_from_json(br#"[{"prefix": "/a/", "path": "x"}, {"prefix": "/e/", "internal": "echo", "settings": {"pattern": "x/*"}}]"#)
            .unwrap();
    assert_eq!(many[1].internal.as_deref(), Some("echo"));
    assert_eq!(many[1].settings.get("pattern").and_then(|v| v.as_str()), Some("x/*"));
    let cases: [(&[u8], &str, &str); 7] = [
        (b"nope", "", "not valid JSON"),
        (b"3", "", "expected a service"),
        (b"[]", "", "empty"),
        (br#"{"prefix": "/a/", "path": "x", "colour": 1}"#, "service[0]", "unknown field `colour`"),
        (br#"{"prefix": "/a/", "path": "x", "count_process": "2"}"#, "service[0]", "invalid type"),
        (br#"[{"prefix": "/a/", "path": "x"}, {"prefix": "/b/", "path": "x", "max_t": 0}]"#, "service[1] (/b/).max_t", "at least 1"),
        (br#"{"prefix": "a", "path": "x"}"#, "service[0] (a).prefix", "start and end"),
    ];
    for (body, field, reason) in cases {
        let (f, r) = services_from_json(body).unwrap_err();
        assert_eq!(f, field, "{}", String::from_utf8_lossy(body));
        assert!(r.contains(reason), "{reason:?} not in {r:?}");
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
    assert!(name.ends_with(":7311") && crate::cluster::config::valid_name(&name), "{name}");
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
        "round_robin",
        "least_busy",
        "none",
    ] {
        parse(&format!("[core.unmanaged]\ndest_refresh = \"{v}\"")).unwrap_or_else(|e| panic!("{v}: {e}"));
    }
}
