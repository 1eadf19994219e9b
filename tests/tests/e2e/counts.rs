//! count_process x count_thread instances, each with its own indexes.

use cumulo_e2e::*;
use std::collections::HashSet;

fn six() -> Config {
    Config::new()
        .unmanaged("dest_refresh", q("round_robin"))
        .service(ts!("/n/").set("count_process", 2).set("count_thread", 3))
}

#[test]
fn two_processes_of_three_threads_are_six_instances() {
    let core = Core::start(six());
    let mut api = core.client();
    let ids = api.mcast_async("/n/x", b"", b"", opts(5000)).unwrap();
    assert_eq!(ids.len(), 6);
    let mut slots = HashSet::new();
    let (mut pids, mut instances) = (HashSet::new(), HashSet::new());
    for t in ids {
        let r = api.recv_async(Some(t), ms(5000)).unwrap().expect("answer").1.unwrap();
        assert_eq!((field(&r, "process_count"), field(&r, "thread_count")), ("2".into(), "3".into()));
        slots.insert((field(&r, "process"), field(&r, "thread")));
        pids.insert(field(&r, "pid"));
        instances.insert(field(&r, "instance"));
    }
    let want: HashSet<_> = [0, 1].iter().flat_map(|p| (0..3).map(move |t| (p.to_string(), t.to_string()))).collect();
    assert_eq!(slots, want, "every (process_index, thread_index) once");
    assert_eq!(pids.len(), 2, "two OS processes");
    assert_eq!(instances.len(), 6, "six distinct instance ids");
    assert_eq!(core.service_pids().len(), 2);
}

#[test]
fn round_robin_reaches_every_instance() {
    let core = Core::start(six());
    let mut api = core.client();
    let mut seen = HashSet::new();
    for _ in 0..6 {
        let r = api.send_sync("/n/x", b"", b"", opts(5000)).unwrap();
        seen.insert(field(&r, "instance"));
    }
    assert_eq!(seen.len(), 6, "6 round-robin sends over 6 instances: {seen:?}");
}
