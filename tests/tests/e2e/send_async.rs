//! send_async + recv_async: answers are collected by trans_id or as they come.

use cumulo_e2e::*;

#[test]
fn recv_by_trans_id_in_any_order() {
    let core = Core::start(Config::new().service(ts!("/a/").set("count_thread", 3)));
    let mut api = core.client();
    let tids: Vec<_> = (0..5).map(|i| api.send_async("/a/x", b"", format!("m{i}").as_bytes(), opts(5000))).collect();
    for (i, tid) in tids.iter().enumerate().rev() {
        let (got, r) = api.recv_async(Some(*tid), ms(5000)).unwrap().expect("an answer");
        assert_eq!(got, *tid);
        let r = r.unwrap();
        assert_eq!(r.trans_id, *tid);
        assert_eq!(r.body, format!("m{i}").as_bytes());
        assert_eq!(field(&r, "sync"), "0", "REQUEST.flags must say it was sent with send_async");
    }
    assert!(api.recv_async(None, ms(200)).unwrap().is_none(), "each request gets exactly one response");
}

#[test]
fn recv_next_returns_answers_as_they_arrive() {
    // Three instances and least-busy selection, so the slow request does
    // not hold up the fast ones.
    let cfg = Config::new().unmanaged("dest_refresh", q("least_busy")).service(ts!("/a/").set("count_thread", 3));
    let core = Core::start(cfg);
    let mut api = core.client();
    let slow = api.send_async("/a/x", b"", b"sleep:800", opts(5000));
    std::thread::sleep(ms(100)); // let the slow one be delivered first
    let mut fast = vec![];
    for i in 0..2 {
        fast.push(api.send_async("/a/y", b"", format!("fast{i}").as_bytes(), opts(5000)));
    }
    let mut order = vec![];
    for _ in 0..3 {
        let (tid, r) = api.recv_async(None, ms(5000)).unwrap().expect("an answer");
        assert!(r.is_ok(), "{r:?}");
        order.push(tid);
    }
    assert_eq!(order.last(), Some(&slow), "the 800 ms request must come last; fast ones: {fast:?}");
    assert!(fast.iter().all(|t| order.contains(t)));
}

#[test]
fn trans_ids_are_stamped_and_increasing() {
    let core = Core::start(Config::new().service(ts!("/a/")));
    let mut api = core.client();
    let a = api.send_async("/a/x", b"", b"1", opts(5000));
    let b = api.send_async("/a/x", b"", b"2", opts(5000));
    assert!(b > a);
    assert_eq!((a.node_id(), a.instance_id()), (api.node_id, api.instance_id));
    for t in [a, b] {
        api.recv_async(Some(t), ms(5000)).unwrap().unwrap().1.unwrap();
    }
}
