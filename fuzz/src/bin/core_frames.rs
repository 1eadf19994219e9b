//! Structure-aware: a script of instances connecting, subscribing, sending,
//! answering, forwarding, multicasting, misbehaving (raw frames, a second
//! HELLO, frames only the core sends, RETURN for unknown trans_ids) and
//! disconnecting, played against `Core::handle_frame` and the rest of the
//! state (with an echo service and the real timer loop, on a paused clock).
//!
//! The core runs as two shards (`core.threads` = 2): instances connect to
//! either, so requests, answers, multicasts and forwards cross between them.
//!
//! Besides "no panic" and "only valid frames out", it checks the core's
//! central promise: once every timeout has passed, every request an
//! instance sent (and every multicast copy) got exactly one RESPONSE.
#![no_main]

use arbitrary::Arbitrary;
use cumulo_core::fuzzing;
use cumulo_router::{Endpoint, Outbox};
use cumulo_router::Shared;
use cumulo_proto::{kind, Frame, Send, TransId};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

const PREFIXES: [&str; 3] = ["/a/", "/b/", "/echo/"];
const PATTERNS: [&str; 6] = ["x", "*", "y/*", "?", "x/y", "*/y"];
const NAMES: [&str; 8] = ["/a/x", "/a/y/z", "/b/x", "/b/q", "/echo/x", "/nobody", "/a/x/y", "/b/x/y"];

#[derive(Debug, Arbitrary)]
enum Name {
    Known(u8),
    Any(String),
}

impl Name {
    fn get(&self) -> &str {
        match self {
            Name::Known(i) => NAMES[*i as usize % NAMES.len()],
            Name::Any(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Connect { prefix: u8, window: u8 },
    Subscribe { who: u8, pattern: u8 },
    Unsubscribe { who: u8, pattern: u8 },
    SubscribeCount { who: u8, pattern: u8 },
    Send { who: u8, sync: bool, name: Name, timeout: u16, priority: i8, wait: bool, stamp: Stamp, body: Vec<u8> },
    Mcast { who: u8, name: Name, timeout: u16, priority: i8 },
    Return { who: u8, which: u8, status: u16, info: Vec<u8>, body: Vec<u8> },
    Forward { who: u8, which: u8, name: Name, timeout: u16 },
    /// A RETURN for a trans_id nobody delivered to it.
    ReturnUnknown { who: u8, trans_id: [u8; 16] },
    Ping { who: u8, nonce: u64 },
    Goodbye { who: u8 },
    Disconnect { who: u8 },
    /// Any frame, even one an SDK never sends (HELLO again, REQUEST, ...).
    Frame { who: u8, frame: cumulo_fuzz::OwnedFrame },
    /// Bytes that may not even decode.
    Raw { who: u8, bytes: Vec<u8> },
    Wait { ms: u16 },
}

#[derive(Debug, Arbitrary, Clone, Copy)]
enum Stamp {
    Fresh,
    /// The trans_id of this instance's previous send (maybe still in flight).
    Reuse,
    /// Stamped with another instance: refused with MALFORMED.
    Foreign,
}

struct Conn {
    /// The shard it is connected to.
    shard: usize,
    id: u32,
    outbox: Rc<Outbox>,
    alive: bool,
    /// Requests the core delivered to it, not yet answered by the script.
    delivered: Vec<TransId>,
    /// RESPONSEs owed to it and RESPONSEs it got, by trans_id.
    owed: HashMap<TransId, u32>,
    got: HashMap<TransId, u32>,
    last_sent: TransId,
    nanos: u64,
}

struct World {
    cores: Vec<Shared>,
    conns: Vec<Conn>,
}

impl World {
    fn conn(&mut self, who: u8) -> Option<usize> {
        let alive: Vec<usize> = (0..self.conns.len()).filter(|&i| self.conns[i].alive).collect();
        (!alive.is_empty()).then(|| alive[who as usize % alive.len()])
    }

    fn core(&self, i: usize) -> &Shared {
        &self.cores[self.conns[i].shard]
    }

    fn connect(&mut self, shard: usize, prefix: &str, window: u8) {
        let outbox = Outbox::new(fuzzing::small_limits().max_outbox);
        let admitted =
            self.cores[shard].borrow_mut().admit("", prefix, 0, window as u32, Endpoint::Socket(outbox.clone()));
        if let Ok(a) = admitted {
            self.conns.push(Conn {
                shard,
                id: a.id,
                outbox,
                alive: true,
                delivered: vec![],
                owed: HashMap::new(),
                got: HashMap::new(),
                last_sent: TransId::default(),
                nanos: 0,
            });
        }
    }

    /// What the reader task does with a frame, plus the bookkeeping of
    /// which RESPONSEs are owed.
    fn handle(&mut self, i: usize, frame: Frame) {
        let id = self.conns[i].id;
        if let Frame::SendAsync(s) | Frame::SendSync(s) = &frame {
            *self.conns[i].owed.entry(s.trans_id).or_default() += 1;
            self.conns[i].last_sent = s.trans_id;
        }
        if let Frame::Return(r) = &frame {
            self.conns[i].delivered.retain(|t| *t != r.trans_id);
        }
        if let Frame::Forward(s) = &frame {
            self.conns[i].delivered.retain(|t| *t != s.trans_id);
        }
        let mut c = self.cores[self.conns[i].shard].borrow_mut();
        c.refresh_now();
        if let Err(cumulo_router::RouteError { status, why: msg }) = c.handle_frame(id, frame) {
            let out = &self.conns[i].outbox;
            out.push(|b| cumulo_proto::encode_error(b, status.code(), &msg));
            out.close();
            c.remove_instance(id, &msg);
            drop(c);
            self.drain(i);
            self.conns[i].alive = false;
        }
    }

    fn send_frame(&mut self, i: usize, ty: u8, name: &str, timeout: u16, priority: i8, flags: u8, stamp: Stamp, body: &[u8]) {
        let conn = &mut self.conns[i];
        let trans_id = match stamp {
            Stamp::Reuse if conn.last_sent != TransId::default() => conn.last_sent,
            Stamp::Foreign => TransId::new(1, 1, conn.id.wrapping_add(1000)),
            _ => {
                conn.nanos += 1;
                TransId::new(conn.nanos, 1, conn.id)
            }
        };
        let s = Send { trans_id, timeout: timeout as u32, priority, flags, name, request_info: b"", request: body };
        let mut bytes = Vec::new();
        cumulo_proto::encode_send(&mut bytes, ty, &s);
        self.handle_bytes(i, &bytes);
    }

    fn handle_bytes(&mut self, i: usize, bytes: &[u8]) {
        let max = self.core(i).borrow().limits().max_frame;
        match cumulo_proto::next_frame_len(bytes, max) {
            Ok(Some(n)) => match cumulo_proto::decode(&bytes[cumulo_proto::LEN_PREFIX..n]) {
                Ok(f) => self.handle(i, f),
                Err(_) => self.disconnect(i),
            },
            Ok(None) => {}
            Err(_) => self.disconnect(i),
        }
    }

    fn disconnect(&mut self, i: usize) {
        self.drain(i);
        self.core(i).borrow_mut().remove_instance(self.conns[i].id, "closed by the fuzzer");
        self.conns[i].outbox.close();
        self.conns[i].alive = false;
    }

    /// Reads what the core wrote to connection `i`, as its SDK would.
    fn drain(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        if !conn.alive {
            return;
        }
        let out = conn.outbox.take();
        cumulo_fuzz::check_core_output(&out, |f| match f {
            Frame::Request(r) => conn.delivered.push(r.trans_id),
            Frame::Response(r) => *conn.got.entry(r.trans_id).or_default() += 1,
            Frame::McastSent(m) => {
                for t in m.ids() {
                    *conn.owed.entry(t).or_default() += 1;
                }
            }
            _ => {}
        });
        if conn.outbox.overflowed.get() {
            // The core closed it as a slow consumer; the reader task would
            // now remove it.
            let (id, shard) = (conn.id, conn.shard);
            conn.alive = false;
            self.cores[shard].borrow_mut().remove_instance(id, "slow consumer");
        }
    }

    fn drain_all(&mut self) {
        for i in 0..self.conns.len() {
            self.drain(i);
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    fuzzing::run(async {
        let cores = fuzzing::start_shards(fuzzing::small_limits(), 2).await;
        let mut w = World { cores, conns: vec![] };
        w.connect(0, "/a/", 1);
        w.connect(1, "/b/", 4);
        for op in ops.iter().take(256) {
            match op {
                Op::Connect { prefix, window } => {
                    let shard = *prefix as usize / PREFIXES.len() % w.cores.len();
                    w.connect(shard, PREFIXES[*prefix as usize % PREFIXES.len()], *window)
                }
                Op::Wait { ms } => tokio::time::sleep(Duration::from_millis(*ms as u64)).await,
                op => {
                    let who = match op {
                        Op::Subscribe { who, .. }
                        | Op::Unsubscribe { who, .. }
                        | Op::SubscribeCount { who, .. }
                        | Op::Send { who, .. }
                        | Op::Mcast { who, .. }
                        | Op::Return { who, .. }
                        | Op::Forward { who, .. }
                        | Op::ReturnUnknown { who, .. }
                        | Op::Ping { who, .. }
                        | Op::Goodbye { who }
                        | Op::Disconnect { who }
                        | Op::Frame { who, .. }
                        | Op::Raw { who, .. } => *who,
                        Op::Connect { .. } | Op::Wait { .. } => unreachable!(),
                    };
                    let Some(i) = w.conn(who) else { continue };
                    let control = |ty: u8, p: &u8| {
                        let mut b = Vec::new();
                        let pattern = PATTERNS[*p as usize % PATTERNS.len()];
                        cumulo_proto::encode_control(&mut b, ty, &cumulo_proto::Control { req_id: 7, pattern });
                        b
                    };
                    match op {
                        Op::Subscribe { pattern, .. } => w.handle_bytes(i, &control(kind::SUBSCRIBE, pattern)),
                        Op::Unsubscribe { pattern, .. } => w.handle_bytes(i, &control(kind::UNSUBSCRIBE, pattern)),
                        Op::SubscribeCount { pattern, .. } => {
                            w.handle_bytes(i, &control(kind::SUBSCRIBE_COUNT, pattern))
                        }
                        Op::Send { sync, name, timeout, priority, wait, stamp, body, .. } => {
                            let ty = if *sync { kind::SEND_SYNC } else { kind::SEND_ASYNC };
                            w.send_frame(i, ty, name.get(), *timeout, *priority, *wait as u8, *stamp, body)
                        }
                        Op::Mcast { name, timeout, priority, .. } => {
                            w.send_frame(i, kind::MCAST_ASYNC, name.get(), *timeout, *priority, 0, Stamp::Fresh, b"")
                        }
                        Op::Return { which, status, info, body, .. } => {
                            let d = &w.conns[i].delivered;
                            if d.is_empty() {
                                continue;
                            }
                            let trans_id = d[*which as usize % d.len()];
                            let r = cumulo_proto::Return { trans_id, status: *status, response_info: info, response: body };
                            let mut b = Vec::new();
                            cumulo_proto::encode_return(&mut b, kind::RETURN, &r);
                            w.handle_bytes(i, &b);
                        }
                        Op::Forward { which, name, timeout, .. } => {
                            let d = &w.conns[i].delivered;
                            if d.is_empty() {
                                continue;
                            }
                            let trans_id = d[*which as usize % d.len()];
                            let s = Send {
                                trans_id,
                                timeout: *timeout as u32,
                                priority: 0,
                                flags: 0,
                                name: name.get(),
                                request_info: b"",
                                request: b"fwd",
                            };
                            let mut b = Vec::new();
                            cumulo_proto::encode_send(&mut b, kind::FORWARD, &s);
                            w.handle_bytes(i, &b);
                        }
                        Op::ReturnUnknown { trans_id, .. } => {
                            let r = cumulo_proto::Return { trans_id: TransId(*trans_id), status: 0, response_info: b"", response: b"" };
                            let mut b = Vec::new();
                            cumulo_proto::encode_return(&mut b, kind::RETURN, &r);
                            w.handle_bytes(i, &b);
                        }
                        Op::Ping { nonce, .. } => w.handle(i, Frame::Ping(*nonce)),
                        Op::Goodbye { .. } => w.handle(i, Frame::Goodbye),
                        Op::Disconnect { .. } => w.disconnect(i),
                        Op::Frame { frame, .. } => {
                            let mut b = Vec::new();
                            cumulo_proto::encode_frame(&mut b, &frame.as_frame());
                            w.handle_bytes(i, &b);
                        }
                        Op::Raw { bytes, .. } => w.handle_bytes(i, bytes),
                        Op::Connect { .. } | Op::Wait { .. } => unreachable!(),
                    }
                }
            }
            // What crossed between the shards arrives.
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
            w.drain_all();
        }
        // Past every timeout (at most u32::MAX ms, the default ones far less):
        // each request has ended, so each is answered exactly once.
        tokio::time::sleep(Duration::from_millis(u32::MAX as u64 + 10_000)).await;
        w.drain_all();
        for c in w.conns.iter().filter(|c| c.alive) {
            assert_eq!(c.got, c.owed, "instance {}: RESPONSEs got vs owed", c.id);
        }
    });
});
