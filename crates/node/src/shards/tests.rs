//! Two shards in one test: requests, multicast, forwards, queue order,
//! timeouts and a dying instance across them. Both shards run on the test's
//! thread (the channels are the daemon's; only the threads differ), on a
//! paused clock, so each test is deterministic; `across_real_threads` runs
//! one shard on a thread of its own.

use super::*;
use crate::test_util::small_limits;
use cumulo_config::{DestRefresh, ServiceOptions};
use cumulo_proto::{Send, Status, TransId, TransIdGen, REQUEST_MCAST};
use cumulo_router::shards::{policy_bits, policy_of, FLAGS_MASK};
use cumulo_router::Endpoint;
use std::cell::RefCell;
use std::time::Duration;
use std::time::Instant;

/// A frame a client received, owned.
#[derive(Debug, Clone)]
struct Got {
    kind: &'static str,
    trans_id: TransId,
    status: u16,
    body: Vec<u8>,
    priority: i8,
    flags: u8,
}

/// A socket instance driven by hand: frames in through `handle_frame`,
/// frames out read from its outbox.
struct Client {
    core: Shared,
    id: InstanceId,
    out: Rc<Outbox>,
    ids: RefCell<TransIdGen>,
}

impl Client {
    fn connect(core: &Shared, prefix: &str, window: u32) -> Client {
        let out = Outbox::new(1 << 20);
        let a = core.borrow_mut().admit("", prefix, 0, window, Endpoint::Socket(out.clone())).expect("admitted");
        let node = core.borrow().limits().node_id;
        Client { core: core.clone(), id: a.id, out, ids: RefCell::new(TransIdGen::new(node, a.id)) }
    }

    fn frame(&self, f: Frame<'_>) {
        let mut c = self.core.borrow_mut();
        c.refresh_now();
        c.handle_frame(self.id, f).expect("a well-formed frame");
    }

    fn subscribe(&self, pattern: &str) {
        self.core.borrow_mut().subscribe(self.id, pattern).expect("subscribed");
    }

    fn send(&self, name: &str, body: &[u8], timeout: u32, priority: i8) -> TransId {
        let tid = self.ids.borrow_mut().next();
        let s = Send { trans_id: tid, timeout, priority, flags: 0, name, request_info: b"", request: body };
        self.frame(Frame::SendSync(s));
        tid
    }

    fn mcast(&self, name: &str) {
        let tid = self.ids.borrow_mut().next();
        let s = Send { trans_id: tid, timeout: 5000, priority: 0, flags: 0, name, request_info: b"", request: b"m" };
        self.frame(Frame::McastAsync(s));
    }

    fn ret(&self, tid: TransId, body: &[u8]) {
        let r = cumulo_proto::Return { trans_id: tid, status: 0, response_info: b"", response: body };
        self.frame(Frame::Return(r));
    }

    fn forward(&self, tid: TransId, name: &str) {
        let s = Send { trans_id: tid, timeout: 0, priority: 0, flags: 0, name, request_info: b"", request: b"fwd" };
        self.frame(Frame::Forward(s));
    }

    /// Frames received since the last call.
    fn got(&self) -> Vec<Got> {
        let bytes = self.out.take();
        let mut out = Vec::new();
        let mut at = 0;
        while let Ok(Some(n)) = cumulo_proto::next_frame_len(&bytes[at..], u32::MAX) {
            let f = cumulo_proto::decode(&bytes[at + cumulo_proto::LEN_PREFIX..at + n]).expect("decodes");
            at += n;
            let g = match f {
                Frame::Request(r) => Got {
                    kind: "REQUEST",
                    trans_id: r.trans_id,
                    status: 0,
                    body: r.request.to_vec(),
                    priority: r.priority,
                    flags: r.flags,
                },
                Frame::Response(r) => Got {
                    kind: "RESPONSE",
                    trans_id: r.trans_id,
                    status: r.status,
                    body: r.response.to_vec(),
                    priority: 0,
                    flags: 0,
                },
                other => Got {
                    kind: other.type_name(),
                    trans_id: TransId::default(),
                    status: 0,
                    body: vec![],
                    priority: 0,
                    flags: 0,
                },
            };
            out.push(g);
        }
        out
    }

    fn requests(&self) -> Vec<Got> {
        self.got().into_iter().filter(|g| g.kind == "REQUEST").collect()
    }

    fn responses(&self) -> Vec<Got> {
        self.got().into_iter().filter(|g| g.kind == "RESPONSE").collect()
    }
}

/// Two linked shards with their timer loops. Call inside a `LocalSet`.
fn two_shards() -> (Shared, Shared) {
    let mut ends = channels(2);
    let (e1, e0) = (ends.pop().unwrap(), ends.pop().unwrap());
    let new = || Rc::new(RefCell::new(Core::new(small_limits(), ServiceOptions::default())));
    let (a, b) = (new(), new());
    attach(&a, e0);
    attach(&b, e1);
    tokio::task::spawn_local(crate::runtime::timer_loop(a.clone()));
    tokio::task::spawn_local(crate::runtime::timer_loop(b.clone()));
    (a, b)
}

/// Lets the shards' tasks pass everything that is waiting.
async fn settle() {
    for _ in 0..64 {
        tokio::task::yield_now().await;
    }
}

#[test]
fn a_request_crosses_shards_and_its_answer_comes_back() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let server = Client::connect(&b, "/s/", 1);
        server.subscribe("echo");
        settle().await;
        assert_eq!(a.borrow_mut().registry_mut().lookup("/s/echo").map(|e| e.instances.len()), Some(1), "replicated");
        let client = Client::connect(&a, "/c/", 1);
        let tid = client.send("/s/echo", b"hello", 5000, 0);
        settle().await;
        let reqs = server.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!((reqs[0].trans_id, &reqs[0].body[..]), (tid, &b"hello"[..]));
        server.ret(tid, b"world");
        settle().await;
        let resp = client.responses();
        assert_eq!(resp.len(), 1);
        assert_eq!((resp[0].trans_id, resp[0].status, &resp[0].body[..]), (tid, 0, &b"world"[..]));
        assert!(a.borrow().in_flight() == 0 && b.borrow().in_flight() == 0, "nothing left in flight");
        // The pseudo-instances hold no connection.
        assert_eq!((a.borrow().connections(), b.borrow().connections()), (1, 1));
    });
}

#[test]
fn closest_prefers_an_instance_on_the_same_shard() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let near = Client::connect(&a, "/s/", 64);
        let far = Client::connect(&b, "/s/", 64);
        near.subscribe("x");
        far.subscribe("x");
        settle().await;
        let client = Client::connect(&a, "/c/", 64);
        for _ in 0..20 {
            client.send("/s/x", b"", 5000, 0);
        }
        settle().await;
        assert_eq!((near.requests().len(), far.requests().len()), (20, 0));
        // With the near one gone, the other shard serves.
        a.borrow_mut().remove_instance(near.id, "test");
        client.send("/s/x", b"", 5000, 0);
        settle().await;
        assert_eq!(far.requests().len(), 1);
    });
}

#[test]
fn mcast_reaches_every_instance_on_both_shards_and_every_answer_comes_back() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let servers = [Client::connect(&a, "/s/", 4), Client::connect(&b, "/s/", 4), Client::connect(&b, "/s/", 4)];
        for s in &servers {
            s.subscribe("m");
        }
        settle().await;
        let client = Client::connect(&a, "/c/", 4);
        client.mcast("/s/m");
        settle().await;
        let sent = client.got();
        assert_eq!(sent.iter().filter(|g| g.kind == "MCAST_SENT").count(), 1);
        for s in &servers {
            let reqs = s.requests();
            assert_eq!(reqs.len(), 1, "one copy per instance");
            assert_ne!(reqs[0].flags & REQUEST_MCAST, 0);
            s.ret(reqs[0].trans_id, b"ok");
        }
        settle().await;
        let resp = client.responses();
        assert_eq!(resp.len(), 3);
        assert!(resp.iter().all(|r| r.status == 0 && r.body == b"ok"));
    });
}

/// A multicast to more instances of another shard than a queue holds by
/// default (`queue_limit`, 1024) plus the pseudo-instance's window (1024):
/// every instance there gets its copy, none fails QUEUE_FULL (as one tick to
/// 5,000 WebSocket connections of the other shard did).
#[test]
fn mcast_to_thousands_of_instances_of_another_shard_reaches_every_one() {
    const SERVERS: usize = 3000;
    crate::test_util::run(async {
        let mut ends = channels(2);
        let (e1, e0) = (ends.pop().unwrap(), ends.pop().unwrap());
        let limits = cumulo_router::Limits {
            max_connections: SERVERS as u32 + 16,
            max_queued_bytes: 64 << 20,
            max_sender_queued_bytes: 64 << 20,
            ..small_limits()
        };
        let new = || Rc::new(RefCell::new(Core::new(limits.clone(), ServiceOptions::default())));
        let (a, b) = (new(), new());
        attach(&a, e0);
        attach(&b, e1);
        tokio::task::spawn_local(crate::runtime::timer_loop(a.clone()));
        tokio::task::spawn_local(crate::runtime::timer_loop(b.clone()));
        let servers: Vec<Client> = (0..SERVERS).map(|_| Client::connect(&b, "/s/", 4)).collect();
        for s in &servers {
            s.subscribe("m");
        }
        settle().await;
        let client = Client::connect(&a, "/c/", 4);
        client.mcast("/s/m");
        let mut copies = vec![0; SERVERS];
        // The window lets 1024 copies over at a time; answers make room.
        for _ in 0..10 {
            settle().await;
            for (i, s) in servers.iter().enumerate() {
                for r in s.requests() {
                    copies[i] += 1;
                    s.ret(r.trans_id, b"ok");
                }
            }
        }
        settle().await;
        assert!(copies.iter().all(|&n| n == 1), "copies per instance: {:?}", {
            let mut c = copies.clone();
            c.sort();
            c.dedup();
            c
        });
        let resp = client.responses();
        assert_eq!(resp.len(), SERVERS);
        assert!(resp.iter().all(|r| r.status == 0 && r.body == b"ok"), "every copy answered OK");
    });
}

#[test]
fn mcast_gives_an_instance_of_another_shard_matching_by_two_patterns_one_copy() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        // As e2e mcast.rs with the instances spread: one instance here and
        // one there subscribe two matching patterns, one there a third.
        let (here, twice, other) =
            (Client::connect(&a, "/m/", 4), Client::connect(&b, "/m/", 4), Client::connect(&b, "/m/", 4));
        for s in [&here, &twice] {
            s.subscribe("x");
            s.subscribe("*");
        }
        other.subscribe("?");
        settle().await;
        let client = Client::connect(&a, "/c/", 4);
        client.mcast("/m/x");
        settle().await;
        assert_eq!(client.got().iter().filter(|g| g.kind == "MCAST_SENT").count(), 1);
        for s in [&here, &twice, &other] {
            let reqs = s.requests();
            assert_eq!(reqs.len(), 1, "one copy per instance");
            s.ret(reqs[0].trans_id, b"ok");
        }
        settle().await;
        assert_eq!(client.responses().len(), 3, "three copies, each answered");
        // Once that shard's instance drops a pattern, the mirror follows.
        b.borrow_mut().unsubscribe(twice.id, "x").unwrap();
        b.borrow_mut().remove_instance(other.id, "gone");
        settle().await;
        client.mcast("/m/x");
        settle().await;
        assert_eq!((here.requests().len(), twice.requests().len()), (1, 1));
    });
}

#[test]
fn closest_spills_to_another_shard_when_every_instance_here_is_busy() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let (near, far) = (Client::connect(&a, "/s/", 1), Client::connect(&b, "/s/", 1));
        near.subscribe("x");
        far.subscribe("x");
        settle().await;
        let client = Client::connect(&a, "/c/", 64);
        for _ in 0..20 {
            client.send("/s/x", b"", 5000, 0);
        }
        settle().await;
        // Both take requests, one at a time (window 1), until all are served.
        let mut served = [0usize; 2];
        for _ in 0..40 {
            for (n, s) in [&near, &far].into_iter().enumerate() {
                for r in s.requests() {
                    served[n] += 1;
                    s.ret(r.trans_id, b"");
                }
            }
            settle().await;
        }
        assert_eq!(served[0] + served[1], 20, "{served:?}");
        assert_eq!(client.responses().len(), 20);
        assert!(served[0] >= 8 && served[1] >= 8, "both shards' instances share the load: {served:?}");
    });
}

#[test]
fn a_request_routed_back_to_its_shard_gets_one_true_answer() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let (near, far) = (Client::connect(&a, "/s/", 1), Client::connect(&b, "/s/", 1));
        near.subscribe("x");
        far.subscribe("x");
        settle().await;
        let client = Client::connect(&a, "/c/", 64);
        // 1 to near; 2 spills to far; 3 waits at near; 4 waits at far.
        let tids: Vec<TransId> = (0..4).map(|_| client.send("/s/x", b"", 5000, 0)).collect();
        settle().await;
        assert_eq!(far.requests().len(), 1);
        // far goes: what it held fails, what waited for it is routed again,
        // back to shard a, which holds its entry.
        b.borrow_mut().remove_instance(far.id, "killed");
        settle().await;
        for _ in 0..8 {
            for r in near.requests() {
                near.ret(r.trans_id, b"near");
            }
            settle().await;
        }
        let resp = client.responses();
        let mut got: Vec<(usize, u16, Vec<u8>)> = resp
            .iter()
            .map(|r| (tids.iter().position(|t| *t == r.trans_id).unwrap(), r.status, r.body.clone()))
            .collect();
        got.sort();
        assert_eq!(got.len(), 4, "one answer per request: {got:?}");
        assert_eq!(got[1].1, Status::Crashed.code(), "{got:?}");
        for (n, status, body) in [&got[0], &got[2], &got[3]] {
            assert!(*status == 0 && body == b"near" || *n == 3 && *status == Status::NoService.code(), "{got:?}");
        }
        assert!(a.borrow().in_flight() == 0 && b.borrow().in_flight() == 0);
        let pseudo = |c: &Shared| {
            c.borrow().instances().filter(|i| i.endpoint().is_pseudo()).map(|i| i.in_flight()).sum::<usize>()
        };
        assert_eq!((pseudo(&a), pseudo(&b)), (0, 0), "no entry left behind on either side");
    });
}

#[test]
fn round_robin_takes_every_instance_of_both_shards_in_turn_from_either_shard() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let rr = Rc::new(ServiceOptions { dest_refresh: DestRefresh::RoundRobin, ..ServiceOptions::default() });
        for c in [&a, &b] {
            c.borrow_mut().set_unmanaged_options(rr.clone());
        }
        let servers = [
            Client::connect(&a, "/w/", 64),
            Client::connect(&b, "/w/", 64),
            Client::connect(&a, "/w/", 64),
            Client::connect(&b, "/w/", 64),
        ];
        for s in &servers {
            s.subscribe("add");
        }
        settle().await;
        // Sequential requests from senders on either shard, as an HTTP
        // gateway's connections land on any shard.
        let senders = [Client::connect(&a, "/c/", 64), Client::connect(&b, "/c/", 64)];
        let mut order = Vec::new();
        for n in 0..12 {
            senders[fastrand::usize(..2) ^ (n % 2)].send("/w/add", b"", 5000, 0);
            settle().await;
            let got: Vec<usize> = (0..4).filter(|i| !servers[*i].requests().is_empty()).collect();
            assert_eq!(got.len(), 1, "one instance per request: {got:?}");
            order.push(got[0]);
        }
        let mut first: Vec<usize> = order[..4].to_vec();
        first.sort();
        assert_eq!(first, [0, 1, 2, 3], "every instance once: {order:?}");
        assert_eq!((&order[..4], &order[..4]), (&order[4..8], &order[8..12]), "in turn: {order:?}");
    });
}

#[test]
fn a_forward_crosses_shards_twice_and_the_sender_gets_the_final_answer() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let first = Client::connect(&b, "/first/", 1);
        first.subscribe("x");
        let second = Client::connect(&a, "/second/", 1);
        second.subscribe("y");
        settle().await;
        let client = Client::connect(&a, "/c/", 1);
        let tid = client.send("/first/x", b"", 5000, 0);
        settle().await;
        assert_eq!(first.requests().len(), 1);
        first.forward(tid, "/second/y");
        settle().await;
        let reqs = second.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!((reqs[0].trans_id, &reqs[0].body[..]), (tid, &b"fwd"[..]));
        second.ret(tid, b"final");
        settle().await;
        let resp = client.responses();
        assert_eq!(resp.len(), 1);
        assert_eq!((resp[0].status, &resp[0].body[..]), (0, &b"final"[..]));
        assert!(a.borrow().in_flight() == 0 && b.borrow().in_flight() == 0);
    });
}

#[test]
fn one_receiver_takes_requests_from_both_shards_in_priority_then_fifo_order() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let server = Client::connect(&b, "/s/", 1);
        server.subscribe("q");
        settle().await;
        let (far, near) = (Client::connect(&a, "/c/", 8), Client::connect(&b, "/c/", 8));
        let first = near.send("/s/q", b"first", 5000, 0);
        settle().await;
        // Order is arrival order at the receiver's shard: a request from
        // the other shard arrives once its batch has crossed.
        far.send("/s/q", b"a", 5000, 5);
        settle().await;
        near.send("/s/q", b"b", 5000, 5);
        settle().await;
        far.send("/s/q", b"c", 5000, -5);
        far.send("/s/q", b"d", 5000, 5);
        settle().await;
        let mut order = Vec::new();
        let mut current = first;
        assert_eq!(server.requests().len(), 1);
        for _ in 0..4 {
            server.ret(current, b"");
            settle().await;
            let r = server.requests();
            assert_eq!(r.len(), 1, "window 1: one at a time");
            order.push((String::from_utf8(r[0].body.clone()).unwrap(), r[0].priority));
            current = r[0].trans_id;
        }
        let names: Vec<&str> = order.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["c", "a", "b", "d"], "most urgent first, then in arrival order");
        server.ret(current, b"");
        settle().await;
        assert_eq!(far.responses().len() + near.responses().len(), 5);
    });
}

#[test]
fn a_request_to_another_shard_times_out_once_and_a_late_answer_is_dropped() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let server = Client::connect(&b, "/s/", 1);
        server.subscribe("slow");
        settle().await;
        let client = Client::connect(&a, "/c/", 1);
        let tid = client.send("/s/slow", b"", 100, 0);
        settle().await;
        assert_eq!(server.requests().len(), 1);
        tokio::time::sleep(Duration::from_millis(150)).await;
        settle().await;
        let resp = client.responses();
        assert_eq!(resp.len(), 1, "one answer: {resp:?}");
        assert_eq!(resp[0].status, Status::Timeout.code());
        server.ret(tid, b"late");
        settle().await;
        assert!(client.responses().is_empty(), "a late answer is dropped");
        assert!(a.borrow().in_flight() == 0 && b.borrow().in_flight() == 0);
        // The pseudo-instance's window place is given back.
        let pseudo = a.borrow().instances().find(|i| i.endpoint().is_pseudo()).map(|i| i.in_flight());
        assert_eq!(pseudo, Some(0));
    });
}

#[test]
fn an_instance_dying_fails_at_once_what_it_held_from_both_shards() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let server = Client::connect(&b, "/s/", 4);
        server.subscribe("d");
        settle().await;
        let (far, near) = (Client::connect(&a, "/c/", 8), Client::connect(&b, "/c/", 8));
        for _ in 0..2 {
            far.send("/s/d", b"", 60_000, 0);
            near.send("/s/d", b"", 60_000, 0);
        }
        // Two more wait in its queue: they are routed again (no other
        // instance: NO_SERVICE), not left to their timeout.
        far.send("/s/d", b"", 60_000, 0);
        near.send("/s/d", b"", 60_000, 0);
        settle().await;
        assert_eq!(server.requests().len(), 4);
        b.borrow_mut().remove_instance(server.id, "killed");
        settle().await;
        // Which four it held depends on arrival (the near ones arrive
        // first); every request is answered once, at once.
        let (mut crashed, mut no_service) = (0, 0);
        for c in [&far, &near] {
            let resp = c.responses();
            assert_eq!(resp.len(), 3, "{resp:?}");
            crashed += resp.iter().filter(|r| r.status == Status::Crashed.code()).count();
            no_service += resp.iter().filter(|r| r.status == Status::NoService.code()).count();
        }
        assert_eq!((crashed, no_service), (4, 2));
        assert!(a.borrow().in_flight() == 0 && b.borrow().in_flight() == 0);
        // Its pattern is gone from the other shard too.
        assert!(a.borrow_mut().registry_mut().lookup("/s/d").is_none());
    });
}

#[test]
fn subscriptions_changed_at_run_time_reach_the_other_shard() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let server = Client::connect(&b, "/s/", 1);
        server.subscribe("x");
        server.subscribe("x");
        settle().await;
        assert_eq!(
            a.borrow_mut().registry_mut().lookup("/s/x").map(|e| e.instances.len()),
            Some(2),
            "one per subscription"
        );
        b.borrow_mut().unsubscribe(server.id, "x").unwrap();
        settle().await;
        assert_eq!(a.borrow_mut().registry_mut().lookup("/s/x").map(|e| e.instances.len()), Some(1));
        b.borrow_mut().unsubscribe(server.id, "x").unwrap();
        settle().await;
        let client = Client::connect(&a, "/c/", 1);
        client.send("/s/x", b"", 5000, 0);
        let resp = client.responses();
        assert_eq!(resp.len(), 1, "answered at once");
        assert_eq!(resp[0].status, Status::NoService.code());
    });
}

#[test]
fn instance_ids_and_multicast_stamps_never_meet_across_shards() {
    crate::test_util::run(async {
        let (a, b) = two_shards();
        let ids_a: Vec<_> = (0..5).map(|_| Client::connect(&a, "/c/", 1).id).collect();
        let ids_b: Vec<_> = (0..5).map(|_| Client::connect(&b, "/c/", 1).id).collect();
        assert!(ids_a.iter().all(|i| i % 2 == 1) && ids_b.iter().all(|i| i % 2 == 0), "{ids_a:?} {ids_b:?}");
        let (sa, sb) = (a.borrow_mut().next_trans_id(), b.borrow_mut().next_trans_id());
        assert_ne!(sa.instance_id(), sb.instance_id());
    });
}

#[test]
fn across_real_threads() {
    // Shard 1 on a thread of its own with an echo service; shard 0 here.
    let mut ends = channels(2);
    let e1 = ends.pop().unwrap();
    let e0 = ends.pop().unwrap();
    let stop = e0.peers[1].clone(); // to shard 1's inbox
    let other = std::thread::spawn(move || {
        crate::test_util::run_unpaused(async move {
            let core = Rc::new(RefCell::new(Core::new(small_limits(), ServiceOptions::default())));
            let links = attach(&core, e1);
            tokio::task::spawn_local(crate::runtime::timer_loop(core.clone()));
            // An echo of its own: the binary's catalogue is not the node's.
            let api =
                crate::api::InternalApi::connect(&core, "/echo/", Rc::default(), Rc::default(), 0, 0, 1, 1).unwrap();
            tokio::task::spawn_local(async move {
                api.subscribe("*").unwrap();
                while let Some(req) = api.next_request().await {
                    api.return_(&req, Status::Ok, &req.request_info, &req.request);
                }
            });
            links.stopped().await;
        })
    });
    crate::test_util::run_unpaused(async move {
        let core = Rc::new(RefCell::new(Core::new(small_limits(), ServiceOptions::default())));
        let links = attach(&core, e0);
        tokio::task::spawn_local(crate::runtime::timer_loop(core.clone()));
        while core.borrow_mut().registry_mut().lookup("/echo/x").is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let client = Client::connect(&core, "/c/", 64);
        let sent: Vec<TransId> = (0..200).map(|i| client.send("/echo/x", format!("{i}").as_bytes(), 5000, 0)).collect();
        let mut got = Vec::new();
        while got.len() < sent.len() {
            tokio::time::sleep(Duration::from_millis(1)).await;
            got.extend(client.responses());
        }
        assert!(got.iter().all(|r| r.status == 0), "{got:?}");
        let mut tids: Vec<TransId> = got.iter().map(|r| r.trans_id).collect();
        tids.sort();
        assert_eq!(tids, sent, "every request answered once");
        drop(links);
    });
    let _ = stop.blocking_send(Envelope { from: 0, message: Message::Stop });
    other.join().unwrap();
}

#[test]
fn every_dest_refresh_crosses_in_the_flags_and_leaves_the_protocol_bits_alone() {
    for (i, how) in DestRefresh::ALL.into_iter().enumerate() {
        assert_eq!(how as usize, i, "DestRefresh::ALL is in declaration order");
        let flags = REQUEST_MCAST | policy_bits(how);
        assert_eq!(policy_of(flags), Some(how));
        assert_eq!(flags & FLAGS_MASK, REQUEST_MCAST);
    }
    assert_eq!(policy_of(REQUEST_MCAST | 1), None, "a request from a socket carries none");
}

// Reports: one view of every shard (report.rs).

/// Two linked shards, their links kept (for their reports).
fn two_shards_linked() -> ((Shared, Links), (Shared, Links)) {
    let mut ends = channels(2);
    let (e1, e0) = (ends.pop().unwrap(), ends.pop().unwrap());
    let new = || Rc::new(RefCell::new(Core::new(small_limits(), ServiceOptions::default())));
    let (a, b) = (new(), new());
    let (la, lb) = (attach(&a, e0), attach(&b, e1));
    tokio::task::spawn_local(crate::runtime::timer_loop(a.clone()));
    tokio::task::spawn_local(crate::runtime::timer_loop(b.clone()));
    ((a, la), (b, lb))
}

async fn gather(core: &Shared, links: &Links) -> report::Reports {
    let mine = report::snapshot(&core.borrow(), links.index, &[]);
    links.reports.gather(mine, report::REPORT_TIMEOUT).await
}

#[test]
fn reports_of_both_shards_count_a_request_that_crossed_them_once() {
    crate::test_util::run(async {
        let ((a, la), (b, _lb)) = two_shards_linked();
        let server = Client::connect(&b, "/s/", 8);
        server.subscribe("echo");
        settle().await;
        let client = Client::connect(&a, "/c/", 8);
        let tids: Vec<TransId> = (0..3).map(|_| client.send("/s/echo", b"x", 5000, 0)).collect();
        settle().await;
        assert_eq!(server.requests().len(), 3);
        let r = gather(&a, &la).await;
        assert!(r.missing.is_empty(), "{r:?}");
        assert_eq!(r.shards.iter().map(|s| s.shard).collect::<Vec<_>>(), [0, 1]);
        assert_eq!((r.stats().requests, r.in_flight(), r.connections()), (3, 3, 2), "{r:?}");
        for tid in tids {
            server.ret(tid, b"y");
        }
        settle().await;
        assert_eq!(client.responses().len(), 3);
        let r = gather(&a, &la).await;
        let st = r.stats();
        assert_eq!((st.requests, st.responses, r.in_flight()), (3, 3, 0), "{r:?}");
        // Each shard's share: the requests entered on shard 0, the answers
        // came from shard 1's instance.
        let share: Vec<(u64, u64)> = r.shards.iter().map(|s| (s.stats.requests, s.stats.responses)).collect();
        assert_eq!(share, [(3, 0), (0, 3)]);
        // Per service (both unmanaged here): sent on one shard, received and
        // answered on the other, the pseudo-instances not counted.
        let u = r.service(None);
        assert_eq!((u.counts.sent, u.counts.received, u.counts.handled(), u.instances), (3, 3, 3, 2));
        assert_eq!(u.counts.duration.counts.iter().sum::<u64>(), 3);
        let on_1: Vec<(InstanceId, u64)> = r.shards[1].instances.iter().map(|i| (i.id, i.handling)).collect();
        assert_eq!(on_1, [(server.id, 0)]);
    });
}

#[test]
fn a_shard_that_does_not_answer_is_named_missing_within_the_timeout_and_asked_once() {
    crate::test_util::run(async {
        // Shard 1's inbox exists, but nothing reads it: a shard stuck.
        let mut ends = channels(2);
        let mut e1 = ends.pop().unwrap();
        let e0 = ends.pop().unwrap();
        let core = Rc::new(RefCell::new(Core::new(small_limits(), ServiceOptions::default())));
        let links = attach(&core, e0);
        let started = tokio::time::Instant::now();
        let r = gather(&core, &links).await;
        assert_eq!(r.missing, [1]);
        assert_eq!(r.shards.len(), 1);
        assert_eq!(started.elapsed(), report::REPORT_TIMEOUT);
        // A second call waits for the same question: one at most waits there.
        let r = gather(&core, &links).await;
        assert_eq!(r.missing, [1]);
        let mut asked = 0;
        let mut reply = None;
        while let Ok(envelope) = e1.inbox.try_recv() {
            if let Message::Report(tx) = envelope.message {
                asked += 1;
                reply = Some(tx);
            }
        }
        assert_eq!(asked, 1);
        // Answered late: the next call asks again, and that answer is used.
        let _ = reply.unwrap().send(report::ShardReport { shard: 1, ..Default::default() });
        let started = tokio::time::Instant::now();
        let gathering = gather(&core, &links);
        let answering = async {
            loop {
                tokio::task::yield_now().await;
                if let Ok(Envelope { message: Message::Report(tx), .. }) = e1.inbox.try_recv() {
                    let _ = tx.send(report::ShardReport { shard: 1, connections: 7, ..Default::default() });
                    break;
                }
            }
        };
        let (r, ()) = tokio::join!(gathering, answering);
        assert!(r.missing.is_empty(), "{r:?}");
        assert_eq!(r.connections(), 7);
        assert!(started.elapsed() < report::REPORT_TIMEOUT);
    });
}

// Service connections handed to another shard after their HELLO
// (`handoff`): through the real listener, over a real Unix socket.

/// A process's thread at the other end of a real socket.
struct Wire {
    s: tokio::net::UnixStream,
    buf: Vec<u8>,
}

/// A frame a `Wire` read: its type, and a REQUEST's trans_id or a
/// WELCOME's instance id.
#[derive(Debug)]
struct Read {
    kind: &'static str,
    trans_id: TransId,
    instance: u32,
}

impl Wire {
    async fn connect(path: &std::path::Path, token: &str, thread_index: u32) -> Wire {
        let s = tokio::net::UnixStream::connect(path).await.expect("connects");
        let mut w = Wire { s, buf: Vec::new() };
        let hello = cumulo_proto::Hello { version: 1, window: 4, thread_index, token, prefix: "" };
        w.write(&Frame::Hello(hello)).await;
        w
    }

    async fn write(&mut self, f: &Frame<'_>) {
        use tokio::io::AsyncWriteExt;
        let mut out = Vec::new();
        cumulo_proto::encode_frame(&mut out, f);
        self.s.write_all(&out).await.expect("written");
    }

    /// The next frame of type `kind` (others skipped).
    async fn expect(&mut self, kind: &str) -> Read {
        use tokio::io::AsyncReadExt;
        let read = async {
            loop {
                if let Ok(Some(n)) = cumulo_proto::next_frame_len(&self.buf, u32::MAX) {
                    let bytes: Vec<u8> = self.buf.drain(..n).collect();
                    let f = cumulo_proto::decode(&bytes[cumulo_proto::LEN_PREFIX..]).expect("decodes");
                    let mut r = Read { kind: f.type_name(), trans_id: TransId::default(), instance: 0 };
                    match f {
                        Frame::Request(q) => r.trans_id = q.trans_id,
                        Frame::Welcome(w) => r.instance = w.instance_id,
                        _ => {}
                    }
                    if r.kind == kind {
                        return r;
                    }
                    continue;
                }
                let mut chunk = [0u8; 4096];
                let n = self.s.read(&mut chunk).await.expect("reads");
                assert!(n > 0, "closed before {kind}");
                self.buf.extend_from_slice(&chunk[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(5), read).await.unwrap_or_else(|_| panic!("no {kind} in 5 s"))
    }

    async fn ret(&mut self, tid: TransId) {
        let r = cumulo_proto::Return { trans_id: tid, status: 0, response_info: b"", response: b"served" };
        self.write(&Frame::Return(r)).await;
    }
}

/// Waits (real clock) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < end, "not within 5 s: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A managed process slot on shard 0 (as the supervisor makes one).
fn process_slot(core: &Shared, token: &str, process_index: u32, threads: u32) {
    let slot = cumulo_router::ProcessSlot {
        service: 7,
        prefix: Rc::from("/s/"),
        process_index,
        process_count: 2,
        thread_count: threads,
        options: Rc::default(),
        metrics: Rc::default(),
        retiring: false,
        threads: vec![None; threads as usize],
        shards: vec![0; threads as usize],
        ready: Rc::new(Notify::new()),
        pid: None,
    };
    core.borrow_mut().add_process(Rc::from(token), slot);
}

/// Shard 0's instance listener on a fresh socket path.
fn listen(core: &Shared, name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("cumulo-handoff-{}-{name}", std::process::id())).join("core.sock");
    let l = crate::listener::bind_unix(&path).expect("binds");
    tokio::task::spawn_local(crate::listener::serve_unix(core.clone(), l));
    path
}

#[test]
fn a_service_connection_is_handed_to_its_shard_routed_to_from_both_retired_and_its_death_reported() {
    crate::test_util::run_unpaused(async {
        let (a, b) = two_shards();
        // Process 1 of a one-thread service: (1 * 1 + 0) % 2 = shard 1.
        process_slot(&a, "t1", 1, 1);
        let path = listen(&a, "served");
        let mut w = Wire::connect(&path, "t1", 0).await;
        let id = w.expect("WELCOME").await.instance;
        assert_eq!(a.borrow().handoff().shard_of.get(&id), Some(&(1, 7)), "shard 0 holds it as served by shard 1");
        assert!(!a.borrow().has_instance(&id) && b.borrow().has_instance(&id));
        assert_eq!(a.borrow().process_shards("t1"), vec![1]);
        assert_eq!(a.borrow().connections(), 1, "counted against max_connections on shard 0");
        let sub = cumulo_proto::Control { req_id: 1, pattern: "x" };
        w.write(&Frame::Subscribe(sub)).await;
        until("replicated", || a.borrow_mut().registry_mut().lookup("/s/x").is_some()).await;

        // Routed to from shard 0 and from shard 1.
        for (core, body) in [(&a, &b"zero"[..]), (&b, &b"one"[..])] {
            let client = Client::connect(core, "/c/", 4);
            let tid = client.send("/s/x", body, 5000, 0);
            assert_eq!(w.expect("REQUEST").await.trans_id, tid);
            w.ret(tid).await;
            let mut got = Vec::new();
            until("answered", || {
                got.extend(client.responses());
                !got.is_empty()
            })
            .await;
            assert_eq!((got[0].trans_id, got[0].status, &got[0].body[..]), (tid, 0, &b"served"[..]));
        }

        // Retired from shard 0: TERMINATE reaches it on shard 1, and its
        // pattern goes from both shards.
        let client = Client::connect(&a, "/c/", 4);
        let held = client.send("/s/x", b"held", 60_000, 0);
        assert_eq!(w.expect("REQUEST").await.trans_id, held);
        a.borrow_mut().retire_process("t1", 1000, "process stopped");
        w.expect("TERMINATE").await;
        until("unsubscribed everywhere", || a.borrow_mut().registry_mut().lookup("/s/x").is_none()).await;

        // Its death on shard 1 fails what it held (CRASHED) and frees shard
        // 0's process slot.
        drop(w);
        let mut got = Vec::new();
        until("failed", || {
            got.extend(client.responses());
            !got.is_empty()
        })
        .await;
        assert_eq!((got[0].trans_id, got[0].status), (held, Status::Crashed.code()));
        until("slot freed", || a.borrow().process_instances("t1").is_empty()).await;
        assert!(a.borrow().handoff().shard_of.is_empty() && !b.borrow().has_instance(&id));
        assert_eq!(a.borrow().connections(), 2, "the two clients only");
        let _ = std::fs::remove_file(&path);
    });
}

#[test]
fn process_zero_stays_on_shard_zero_and_closest_keeps_traffic_on_each_shard() {
    crate::test_util::run_unpaused(async {
        let (a, b) = two_shards();
        process_slot(&a, "t0", 0, 1);
        process_slot(&a, "t1", 1, 1);
        let path = listen(&a, "closest");
        let mut w0 = Wire::connect(&path, "t0", 0).await;
        let mut w1 = Wire::connect(&path, "t1", 0).await;
        let (id0, id1) = (w0.expect("WELCOME").await.instance, w1.expect("WELCOME").await.instance);
        assert!(a.borrow().has_instance(&id0), "process 0 on shard 0");
        assert!(b.borrow().has_instance(&id1), "process 1 on shard 1");
        for w in [&mut w0, &mut w1] {
            w.write(&Frame::Subscribe(cumulo_proto::Control { req_id: 1, pattern: "x" })).await;
        }
        until("both replicated", || {
            let n = |c: &Shared| c.borrow_mut().registry_mut().lookup("/s/x").map_or(0, |e| e.instances.len());
            n(&a) == 2 && n(&b) == 2
        })
        .await;
        // closest (the default): each shard's sender reaches its own shard's
        // instance.
        let (c0, c1) = (Client::connect(&a, "/c/", 4), Client::connect(&b, "/c/", 4));
        let t0 = c0.send("/s/x", b"", 5000, 0);
        let t1 = c1.send("/s/x", b"", 5000, 0);
        assert_eq!(w0.expect("REQUEST").await.trans_id, t0);
        assert_eq!(w1.expect("REQUEST").await.trans_id, t1);
        let _ = std::fs::remove_file(&path);
    });
}

#[test]
fn a_service_spreads_by_process_and_thread() {
    // 2 processes x 2 threads on 3 shards.
    let managed: Vec<u32> =
        (0..2).flat_map(|p| (0..2).map(move |t| (p, t))).map(|(p, t)| handoff::pick(3, p, 2, t)).collect();
    assert_eq!(managed, [0, 1, 2, 0]);
}

#[test]
fn unmanaged_instances_stay_on_the_shard_that_admitted_them() {
    crate::test_util::run_unpaused(async {
        let (a, b) = two_shards();
        let path = listen(&a, "unmanaged");
        let mut ids = Vec::new();
        let mut wires = Vec::new();
        for _ in 0..4 {
            let s = tokio::net::UnixStream::connect(&path).await.unwrap();
            let mut w = Wire { s, buf: Vec::new() };
            let hello = cumulo_proto::Hello { version: 1, window: 1, thread_index: 0, token: "", prefix: "/u/" };
            w.write(&Frame::Hello(hello)).await;
            ids.push(w.expect("WELCOME").await.instance);
            wires.push(w);
        }
        assert!(ids.iter().all(|i| a.borrow().has_instance(i)), "all on shard 0");
        assert_eq!(b.borrow().connections(), 0);
        let _ = std::fs::remove_file(&path);
    });
}

/// A policy whose breaker opens at the first SERVICE_ERROR of `/s/*`.
fn one_failure_breaker(name: &str) -> cumulo_config::policy::PolicyConfig {
    let b = cumulo_config::policy::BreakerConfig { consecutive_failures: 1, ..Default::default() };
    cumulo_config::policy::PolicyConfig {
        name: name.into(),
        destinations: vec!["/s/*".into()],
        timeout_ms: 0,
        retry: None,
        circuit_breaker: Some(b),
        outlier: None,
    }
}

#[test]
fn policies_set_and_breakers_reset_on_shard_zero_reach_the_other_shard() {
    crate::test_util::run(async {
        let ((a, la), (b, _lb)) = two_shards_linked();
        let missing = policies::set_everywhere(&a, Some(&la), vec![one_failure_breaker("p")]).await;
        assert!(missing.is_empty());
        assert_eq!(b.borrow().policies()[0].name, "p", "in force on shard 1 once confirmed");
        // A failure on shard 1 opens its breaker there.
        let server = Client::connect(&b, "/s/", 8);
        server.subscribe("echo");
        let client = Client::connect(&b, "/c/", 8);
        let tid = client.send("/s/echo", b"x", 5000, 0);
        let failed = cumulo_proto::Return { trans_id: tid, status: 7, response_info: b"", response: b"" };
        server.frame(Frame::Return(failed));
        settle().await;
        let r = gather(&a, &la).await;
        let totals = r.resilience().expect("policies on both shards");
        let open: Vec<(u32, &str)> = totals.breakers.iter().map(|(s, b)| (*s, b.state.name())).collect();
        assert_eq!(open, [(1, "open")]);
        assert_eq!(totals.stats.trips, 1);
        // Reset from shard 0: counted there, closed there.
        assert_eq!(policies::reset_everywhere(&a, Some(&la), Some("p"), None).await, (1, vec![]));
        assert_eq!(b.borrow().resilience_report().unwrap().breakers[0].state.name(), "closed");
        // No policy: nothing reported.
        policies::set_everywhere(&a, Some(&la), vec![]).await;
        assert!(gather(&a, &la).await.resilience().is_none());
    });
}

/// A request that reaches a shard after a service's instance subscribed on
/// another shard, but before this shard's copy of that subscription, waits
/// the moment the copy takes instead of failing NO_SERVICE; a name the
/// service does not serve is NO_SERVICE once that moment has passed.
#[test]
fn a_request_racing_a_new_subscription_on_another_shard_waits_for_its_copy() {
    crate::test_util::run_unpaused(async {
        let (a, b) = two_shards();
        a.borrow().availability().register(7, "/s/").slot_added(cumulo_router::SlotPhase::Running);
        process_slot(&a, "t0", 0, 1);
        let out = Outbox::new(1 << 20);
        let id = a.borrow_mut().admit("t0", "/s/", 0, 4, Endpoint::Socket(out.clone())).expect("admitted").id;
        let node = a.borrow().limits().node_id;
        let service = Client { core: a.clone(), id, out, ids: RefCell::new(TransIdGen::new(node, id)) };
        // Subscribed on shard 0; shard 1 learns of it once its task runs.
        service.subscribe("x");
        let client = Client::connect(&b, "/c/", 4);
        assert!(b.borrow_mut().registry_mut().lookup("/s/x").is_none(), "not yet on shard 1");
        let raced = client.send("/s/x", b"raced", 5000, 0);
        let typo = client.send("/s/nothing", b"", 5000, 0);
        assert!(client.responses().is_empty(), "neither is NO_SERVICE at once");
        let started = Instant::now();
        let mut requests = Vec::new();
        until("the raced request delivered", || {
            requests.extend(service.requests());
            requests.iter().any(|g| g.trans_id == raced)
        })
        .await;
        let mut got = Vec::new();
        until("the unserved name answered", || {
            got.extend(client.responses());
            got.iter().any(|g| g.trans_id == typo)
        })
        .await;
        let answer = got.iter().find(|g| g.trans_id == typo).unwrap();
        assert_eq!(answer.status, Status::NoService.code());
        assert!(started.elapsed() < Duration::from_secs(2), "looked at again, not held to its timeout");
    });
}
