//! Sending: the default priority, the frame limit, what a wait does with
//! the other frames, and decoding each frame once.

use super::fake_core::{request, returned, tid, FakeCore, Said};
use crate::{Answer, Error, SendOptions, Status};
use cumulo_proto::{decode, kind, Frame, Return};
use std::time::Duration;

/// The priority, timeout and flags of a SEND_* frame.
fn send_fields(f: &[u8]) -> (i8, u32, u8) {
    match decode(f).unwrap() {
        Frame::SendAsync(s) | Frame::SendSync(s) | Frame::McastAsync(s) => (s.priority, s.timeout, s.flags),
        other => panic!("expected a send, got {other:?}"),
    }
}

fn respond(peer: &mut super::fake_core::Peer, f: &[u8], status: Status, body: &[u8]) {
    let Ok(Frame::SendAsync(s) | Frame::SendSync(s)) = decode(f) else { panic!("not a send") };
    let r = Return { trans_id: s.trans_id, status: status.code(), response_info: b"", response: body };
    peer.write(|b| cumulo_proto::encode_return(b, kind::RESPONSE, &r));
}

#[test]
fn a_send_without_a_priority_has_the_welcome_priority_default() {
    let said = Said { priority_default: -4, ..Said::default() };
    let (core, mut api) = FakeCore::with_api_said(said, |peer| {
        assert_eq!(send_fields(&peer.expect(kind::SEND_ASYNC)), (-4, 0, 0), "default options");
        assert_eq!(send_fields(&peer.expect(kind::SEND_ASYNC)).0, 9, "a priority given");
        assert_eq!(send_fields(&peer.expect(kind::SEND_ASYNC)).0, 0, "exactly 0");
        let f = peer.expect(kind::SEND_SYNC);
        assert_eq!(send_fields(&f), (-4, 250, 1), "send_sync with a timeout and wait_for_service");
        respond(peer, &f, Status::Ok, b"");
        let f = peer.expect(kind::MCAST_ASYNC);
        assert_eq!(send_fields(&f).0, -4, "mcast_async");
        let Ok(Frame::McastAsync(s)) = decode(&f) else { panic!() };
        peer.write(|b| cumulo_proto::encode_mcast_sent(b, &s.trans_id, &[]));
        peer.expect_goodbye_and_close();
    });
    assert_eq!(api.priority_default, -4);
    api.send_async("/a", b"", b"", SendOptions::default());
    api.send_async("/a", b"", b"", SendOptions { priority: 9, ..Default::default() });
    api.send_async("/a", b"", b"", SendOptions { priority: 0, exact_priority: true, ..Default::default() });
    api.send_sync("/a", b"", b"", SendOptions { timeout: 250, wait_for_service: true, ..Default::default() }).unwrap();
    assert_eq!(api.mcast_async("/a", b"", b"", SendOptions::default()).unwrap(), vec![]);
    drop(api);
    core.join();
}

#[test]
fn a_send_over_the_core_frame_limit_is_refused_here_and_the_connection_stays() {
    let said = Said { max_frame: 1024, ..Said::default() };
    let (core, mut api) = FakeCore::with_api_said(said, |peer| {
        // Only the small send reaches the core.
        let f = peer.expect(kind::SEND_SYNC);
        respond(peer, &f, Status::Ok, b"small one answered");
        peer.expect_goodbye_and_close();
    });
    let big = vec![b'x'; 2000];
    match api.send_sync("/a", b"", &big, SendOptions::default()) {
        Err(Error::Status { status: Status::TooLarge, message }) => assert!(message.contains("1024"), "{message}"),
        other => panic!("{other:?}"),
    }
    let t = api.send_async("/a", b"", &big, SendOptions::default());
    let (got, r) = api.recv_async(Some(t), Duration::ZERO).unwrap().expect("the TOO_LARGE answer is there at once");
    assert_eq!(got, t);
    assert_eq!(r.unwrap_err().status(), Some(Status::TooLarge));
    assert_eq!(api.send_sync("/a", b"", b"small", SendOptions::default()).unwrap().body, b"small one answered");
    drop(api);
    core.join();
}

#[test]
fn an_error_response_carries_its_status_and_message() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        let f = peer.expect(kind::SEND_SYNC);
        respond(peer, &f, Status::NoService, b"no service has that name");
        peer.expect_goodbye_and_close();
    });
    match api.send_sync("/nobody", b"", b"", SendOptions::default()) {
        Err(Error::Status { status: Status::NoService, message }) => assert_eq!(message, "no service has that name"),
        other => panic!("{other:?}"),
    }
    drop(api);
    core.join();
}

#[test]
fn while_send_sync_waits_it_answers_ping_keeps_responses_and_queues_requests() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let a = peer.expect(kind::SEND_ASYNC);
        let b = peer.expect(kind::SEND_SYNC);
        let r = request(tid(5), "/fake/x", b"queued");
        peer.write(|out| {
            cumulo_proto::encode_ping(out, kind::PING, 42);
            cumulo_proto::encode_request(out, &r);
        });
        respond(peer, &a, Status::Ok, b"async answer");
        respond(peer, &b, Status::Ok, b"sync answer");
        assert_eq!(decode(&peer.expect(kind::PONG)).unwrap(), Frame::Pong(42));
        // The queued request is served at the next poll.
        assert_eq!(returned(&peer.expect(kind::RETURN)).2, b"queued".to_vec());
        peer.write(|out| cumulo_proto::encode_terminate(out, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("x", |_, req| Ok(Answer::body(req.request))).unwrap();
    let a = api.send_async("/a", b"", b"", SendOptions::default());
    assert_eq!(api.send_sync("/b", b"", b"", SendOptions::default()).unwrap().body, b"sync answer");
    let (_, r) = api.recv_async(Some(a), Duration::ZERO).unwrap().expect("kept while send_sync waited");
    assert_eq!(r.unwrap().body, b"async answer");
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}

#[test]
fn each_frame_is_decoded_once_while_a_call_waits_for_its_answer() {
    const OTHERS: usize = 6; // frames that arrive before the awaited one
    let (core, mut api) = FakeCore::with_api(|peer| {
        let f = peer.expect(kind::SUBSCRIBE);
        let Ok(Frame::Subscribe(c)) = decode(&f) else { panic!() };
        peer.write(|out| {
            for n in 0..OTHERS as u64 / 2 {
                cumulo_proto::encode_ping(out, kind::PING, n);
                let r = Return { trans_id: tid(n), status: 0, response_info: b"", response: b"" };
                cumulo_proto::encode_return(out, kind::RESPONSE, &r);
            }
            let reply = cumulo_proto::Reply { req_id: c.req_id, status: 0, value: 0, message: "" };
            cumulo_proto::encode_reply(out, &reply);
        });
        // PONGs are written with the next frame the instance sends.
        let mut pongs = 0;
        let f = loop {
            let f = peer.frame();
            match f[0] {
                kind::PONG => pongs += 1,
                kind::MCAST_ASYNC => break f,
                other => panic!("unexpected frame type {other:#04x}"),
            }
        };
        let Ok(Frame::McastAsync(s)) = decode(&f) else { panic!() };
        peer.write(|out| {
            for n in 0..OTHERS as u64 {
                cumulo_proto::encode_ping(out, kind::PING, 100 + n);
            }
            cumulo_proto::encode_mcast_sent(out, &s.trans_id, &[tid(77)]);
        });
        loop {
            match decode(&peer.frame()).unwrap() {
                Frame::Pong(_) => pongs += 1,
                Frame::Goodbye => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(pongs, OTHERS / 2 + OTHERS, "every PING answered");
        assert!(peer.try_frame().is_none());
    });
    let before = super::decoded();
    api.subscribe("x", |_, _| Ok(Answer::body(""))).unwrap();
    assert_eq!(super::decoded() - before, OTHERS + 1, "subscribe: each frame decoded once");
    let before = super::decoded();
    assert_eq!(api.mcast_async("/m", b"", b"", SendOptions::default()).unwrap(), vec![tid(77)]);
    assert_eq!(super::decoded() - before, OTHERS + 1, "mcast_async: each frame decoded once");
    drop(api);
    core.join();
}

/// RESPONSEs nobody waits for (trans_ids never sent, or sent by a
/// send_sync that gave up) are dropped, not kept: a core answering late, or
/// wrongly, cannot grow the instance's memory. An async send's answer is
/// still kept until recv_async takes it, however late it is collected.
#[test]
fn responses_nobody_waits_for_are_dropped_and_awaited_ones_kept() {
    const UNSOLICITED: u64 = 10_000;
    let (core, mut api) = FakeCore::with_api(|peer| {
        let a = peer.expect(kind::SEND_ASYNC);
        let b = peer.expect(kind::SEND_SYNC);
        peer.write(|out| {
            for n in 0..UNSOLICITED {
                let r = Return { trans_id: tid(1000 + n), status: 0, response_info: b"", response: &[b'x'; 100] };
                cumulo_proto::encode_return(out, kind::RESPONSE, &r);
            }
        });
        respond(peer, &a, Status::Ok, b"async answer");
        // A second answer to the same request: nobody waits for it any more.
        respond(peer, &a, Status::Ok, b"again");
        respond(peer, &b, Status::Ok, b"sync answer");
        peer.expect_goodbye_and_close();
    });
    let a = api.send_async("/a", b"", b"", SendOptions::default());
    assert_eq!(api.send_sync("/b", b"", b"", SendOptions::default()).unwrap().body, b"sync answer");
    assert_eq!(api.inbox.unsolicited, UNSOLICITED + 1);
    assert_eq!(api.inbox.responses.len(), 1, "only the async send's answer is kept");
    let (_, r) = api.recv_async(Some(a), Duration::ZERO).unwrap().expect("the async answer");
    assert_eq!(r.unwrap().body, b"async answer");
    assert!(api.recv_async(None, Duration::from_millis(50)).unwrap().is_none(), "nothing else kept");
    assert!(api.inbox.awaited.is_empty());
    drop(api);
    core.join();
}
