//! Priorities: requests queued for a busy instance are served lowest
//! priority value first, in arrival order within a priority.

use cumulo_e2e::*;

#[test]
fn queued_requests_are_served_by_priority() {
    let core = Core::start(Config::new().service(ts!("/p/")));
    let mut api = core.client();
    // Occupies the only instance (window 1): everything after it queues.
    let busy = api.send_async("/p/x", b"", b"sleep:500", opts(10_000));
    let prios: [i8; 7] = [5, -3, 0, 127, -128, -3, 0];
    let sent: Vec<_> = prios
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let o = SendOptions { timeout: 10_000, priority: p, ..Default::default() };
            (api.send_async("/p/x", b"", format!("{i}").as_bytes(), o), p, i)
        })
        .collect();
    let r = api.recv_async(Some(busy), ms(10_000)).unwrap().unwrap().1.unwrap();
    assert_eq!(field(&r, "seq"), "1");
    let mut served: Vec<(u64, i8, usize)> = sent
        .iter()
        .map(|&(tid, p, i)| {
            let r = api.recv_async(Some(tid), ms(10_000)).unwrap().expect("answer").1.unwrap();
            assert_eq!(field(&r, "priority"), p.to_string(), "the service sees the priority");
            (field(&r, "seq").parse().unwrap(), p, i)
        })
        .collect();
    served.sort();
    let order: Vec<(i8, usize)> = served.iter().map(|&(_, p, i)| (p, i)).collect();
    assert_eq!(order, [(-128, 4), (-3, 1), (-3, 5), (0, 2), (0, 6), (5, 0), (127, 3)]);
}
