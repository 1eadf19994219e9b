use super::members::*;
use super::wire::Control;
use cumulo_config::ServiceOptions;
use cumulo_router::Core;

fn core() -> Core {
    Core::new(cumulo_router::test_util::small_limits(), ServiceOptions::default())
}

fn membership() -> Membership {
    Membership::new("a".into(), 1, "test".into(), vec!["nats://127.0.0.1:4222".into()])
}

#[test]
fn remote_state_is_bounded_and_validated() {
    let (mut core, mut m) = (core(), membership());
    let (member, joined) = m.touch(&mut core, "b", 2, 9);
    assert!(joined);
    let id = member.instance;
    let long = format!("/{}", "x".repeat(MAX_REMOTE_PATTERN_LEN));
    let patterns = vec![
        ("/a/*".to_string(), 3),
        ("/x/**".to_string(), 1),
        ("nope".to_string(), 1),
        (long, 1),
        ("/zero".to_string(), 0),
    ];
    m.apply_state(&mut core, "b", 1, patterns);
    assert_eq!(core.registry().count("/a/*", id), 3, "once per remote instance");
    assert_eq!(m.members["b"].applied.len(), 1, "invalid, too long and empty patterns are not kept");
    // a smaller count, then nothing
    m.apply_state(&mut core, "b", 2, vec![("/a/*".into(), 1)]);
    assert_eq!(core.registry().count("/a/*", id), 1);
    m.apply_state(&mut core, "b", 3, vec![]);
    assert_eq!(core.registry().count("/a/*", id), 0);
    assert!(core.registry_mut().lookup("/a/x").is_none());
    // too many patterns and subscriptions: the rest is ignored, counts clamped
    let many: Vec<(String, u32)> = (0..MAX_REMOTE_PATTERNS + 5).map(|i| (format!("/p/{i}"), 1)).collect();
    m.apply_state(&mut core, "b", 4, many);
    assert_eq!(m.members["b"].applied.len(), MAX_REMOTE_PATTERNS);
    m.apply_state(&mut core, "b", 5, vec![("/a/*".into(), u32::MAX), ("/b/*".into(), 5)]);
    assert_eq!(m.members["b"].subscriptions(), MAX_REMOTE_SUBSCRIPTIONS);
    assert_eq!(m.members["b"].applied_version, 5);
}

#[test]
fn identities_are_checked_and_a_restart_replaces_the_node() {
    let (mut core, mut m) = (core(), membership());
    let boot = m.boot;
    assert_eq!(m.check("a", 1, boot), Err(Refused::Itself));
    assert_eq!(m.check("a", 5, boot + 1), Err(Refused::SameName));
    assert!(matches!(m.check("b", 1, 3), Err(Refused::SameNodeId(_))));
    let first = m.touch(&mut core, "b", 2, 3).0.instance;
    assert!(matches!(m.check("c", 2, 4), Err(Refused::SameNodeId(_))), "b has node_id 2");
    assert_eq!(m.check("b", 2, 3), Ok(()));
    m.apply_state(&mut core, "b", 1, vec![("/b/*".into(), 1)]);
    // b restarted: a new boot id is a new pseudo-instance, the old one gone
    let (again, joined) = m.touch(&mut core, "b", 2, 4);
    assert!(joined);
    let second = again.instance;
    assert_ne!(first, second);
    assert!(!core.has_instance(&first));
    assert!(core.registry_mut().lookup("/b/x").is_none(), "the old incarnation's patterns went with it");
    assert!(m.remove(&mut core, "b", "test"));
    assert!(!core.has_instance(&second) && m.members.is_empty());
}

#[test]
fn the_local_snapshot_leaves_out_other_nodes() {
    let (mut core, mut m) = (core(), membership());
    let id = m.touch(&mut core, "b", 2, 3).0.instance;
    m.apply_state(&mut core, "b", 1, vec![("/remote/*".into(), 2)]);
    assert!(core.registry().count("/remote/*", id) == 2);
    assert!(Membership::snapshot(&core).is_empty(), "remote patterns are not announced again");
    m.local = Membership::snapshot(&core);
    match m.state() {
        Control::State { node, node_id, patterns, .. } => {
            assert_eq!((node.as_str(), node_id, patterns.len()), ("a", 1, 0))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_config_takes_the_server_addresses_the_nats_client_takes() {
    let cases = [
        "nats://127.0.0.1:4222",
        "127.0.0.1:4222",
        "localhost",
        "tls://nats.example.com:4443",
        "ws://[::1]:8080",
        "wss://h",
        "http://127.0.0.1:4222",
        "nats://[::1",
        "nats://",
        "",
        "nats://user:pw@h:1",
        "ftp://h",
    ];
    for s in cases {
        let client = s.parse::<async_nats::ServerAddr>().is_ok();
        assert_eq!(cumulo_config::cluster::is_server_address(s), client, "{s:?}: the NATS client says {client}");
    }
}
