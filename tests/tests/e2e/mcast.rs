//! mcast_async: one copy per subscribed instance, each answered.

use cumulo_e2e::*;
use std::collections::HashSet;

#[test]
fn one_copy_per_instance_and_every_answer_arrives() {
    // 3 instances subscribed twice to matching patterns (still one copy
    // each), 2 instances of another service, and one that does not match.
    let cfg = Config::new()
        .service(ts!("/m/").set("count_thread", 3).env("TS_PATTERNS", "x,*").env("TS_TAG", "a"))
        .service(ts!("/m/").set("count_process", 2).env("TS_PATTERNS", "?").env("TS_TAG", "b"))
        .service(ts!("/other/").env("TS_TAG", "c"));
    let core = Core::start(cfg);
    let mut api = core.client();
    let ids = api.mcast_async("/m/x", b"", b"hi", opts(5000)).unwrap();
    assert_eq!(ids.len(), 5, "copies: 3 of a + 2 of b");
    let mut instances = HashSet::new();
    let mut tags = vec![];
    for tid in &ids {
        let (_, r) = api.recv_async(Some(*tid), ms(5000)).unwrap().expect("every copy is answered");
        let r = r.unwrap();
        assert_eq!(r.body, b"hi");
        assert!(instances.insert(field(&r, "instance")), "two copies reached one instance");
        tags.push(field(&r, "tag"));
    }
    tags.sort();
    assert_eq!(tags, ["a", "a", "a", "b", "b"]);
    assert!(api.recv_async(None, ms(200)).unwrap().is_none(), "no extra copies");
}

#[test]
fn nobody_subscribed_means_no_copies() {
    let core = Core::start(Config::new().service(ts!("/m/")));
    let mut api = core.client();
    assert!(api.mcast_async("/nobody/x", b"", b"hi", opts(5000)).unwrap().is_empty());
    // The connection is still fine.
    assert!(api.send_sync("/m/x", b"", b"ok", opts(5000)).is_ok());
}
