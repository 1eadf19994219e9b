//! The trace context a handler's outgoing requests inherit (PROTOCOL.md
//! 5.1): R's `traceparent` and `tracestate` appended to a send, a multicast
//! and a forward that name none; a handler's own kept; nothing added for a
//! request without one, nor outside a handler.

use super::fake_core::{request, returned, tid, FakeCore};
use crate::{Answer, SendOptions};
use cumulo_proto::{decode, info, kind, Frame, Return};

const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const STATE: &str = "congo=t61rcWkgMzE";

/// The request_info of a SEND_*, MCAST_ASYNC or FORWARD frame.
fn sent_info(f: &[u8]) -> Vec<u8> {
    match decode(f).unwrap() {
        Frame::SendAsync(s) | Frame::SendSync(s) | Frame::McastAsync(s) | Frame::Forward(s) => s.request_info.to_vec(),
        other => panic!("expected a send, got {other:?}"),
    }
}

fn answer_sync(peer: &mut super::fake_core::Peer, f: &[u8]) {
    let Ok(Frame::SendSync(s)) = decode(f) else { panic!("not a send_sync") };
    let r = Return { trans_id: s.trans_id, status: 0, response_info: b"", response: b"" };
    peer.write(|b| cumulo_proto::encode_return(b, kind::RESPONSE, &r));
}

#[test]
fn a_handlers_sends_and_forward_carry_the_trace_context_of_its_request() {
    let traced = info::encode(&[("accept", "text/plain"), ("traceparent", PARENT), ("tracestate", STATE)]);
    let inherited = info::encode(&[("k", "v"), ("traceparent", PARENT), ("tracestate", STATE)]);
    let (core, mut api) = FakeCore::with_api(move |peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let r = cumulo_proto::Request { request_info: &traced, ..request(tid(1), "/fake/calls", b"") };
        peer.write(|b| cumulo_proto::encode_request(b, &r));
        let f = peer.expect(kind::SEND_SYNC);
        assert_eq!(sent_info(&f), inherited, "send_sync: the handler's pairs, then R's two");
        answer_sync(peer, &f);
        assert_eq!(sent_info(&peer.expect(kind::SEND_ASYNC)), inherited, "send_async");
        let f = peer.expect(kind::MCAST_ASYNC);
        assert_eq!(sent_info(&f), inherited, "mcast_async");
        let Ok(Frame::McastAsync(m)) = decode(&f) else { panic!() };
        peer.write(|b| cumulo_proto::encode_mcast_sent(b, &m.trans_id, &[]));
        let own = info::encode(&[("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]);
        assert_eq!(sent_info(&peer.expect(kind::SEND_ASYNC)), own, "a handler's own traceparent is kept");
        assert_eq!(returned(&peer.frame()).0, 0, "the handler's answer");

        // A forward inherits too; a request without traceparent passes nothing on.
        let r = cumulo_proto::Request { request_info: &traced, ..request(tid(2), "/fake/forward", b"") };
        peer.write(|b| cumulo_proto::encode_request(b, &r));
        assert_eq!(sent_info(&peer.expect(kind::FORWARD)), inherited, "forward");
        let f = peer.request(tid(3), "/fake/forward", b"");
        assert_eq!(sent_info(&f), info::encode(&[("k", "v")]), "no traceparent in R: nothing added");
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        // After the handlers: a send of the program's own.
        assert_eq!(sent_info(&peer.expect(kind::SEND_ASYNC)), b"", "outside a handler: nothing added");
        peer.expect_goodbye_and_close();
    });
    api.subscribe("calls", |api, _req| {
        let kv = info::encode(&[("k", "v")]);
        api.send_sync("/b", &kv, b"", SendOptions::default())?;
        api.send_async("/b", &kv, b"", SendOptions::default());
        api.mcast_async("/b", &kv, b"", SendOptions::default())?;
        let own = info::encode(&[("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")]);
        api.send_async("/b", &own, b"", SendOptions::default());
        Ok(Answer::body("done"))
    })
    .unwrap();
    api.subscribe("forward", |_, req| Ok(Answer::forward("/b", info::encode(&[("k", "v")]), req.request.to_vec())))
        .unwrap();
    assert!(!api.poll(None).unwrap());
    api.send_async("/b", b"", b"", SendOptions::default());
    drop(api);
    core.join();
}
