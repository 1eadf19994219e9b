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
    assert_eq!(cfg.name_limits(), crate::pattern::NameLimits::default());
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
