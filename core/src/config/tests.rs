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
