//! The session: HELLO and WELCOME, what WELCOME said as accessors, errors
//! from the core, TERMINATE, and GOODBYE on close and on drop.

use super::fake_core::{request, returned, tid, FakeCore, GotHello, Said};
use crate::{Answer, Api, Error, Options, SendOptions, Status};
use cumulo_proto::{kind, Frame};

#[test]
fn welcome_fields_are_the_accessors_and_hello_says_who_connects() {
    let said = Said { priority_default: -4, window: 3, ..Said::default() };
    let core = FakeCore::start(said.clone(), |peer| {
        assert_eq!(
            peer.hello,
            GotHello { version: 1, window: 5, thread_index: 2, token: String::new(), prefix: "/fake/".into() }
        );
        peer.expect_goodbye_and_close();
    });
    let api = Api::connect(Options { thread_index: 2, window: 5, ..Options::unmanaged(core.socket.clone(), "/fake/") })
        .unwrap();
    let got = (
        [api.node_id, api.instance_id, api.process_index, api.process_count, api.thread_count, api.thread_index],
        [api.window, api.max_frame, api.timeout_async, api.timeout_sync, api.timeout_terminate, api.keepalive],
        api.priority_default,
        api.prefix.as_str(),
    );
    let want = (
        [said.node_id, said.instance_id, said.process_index, said.process_count, said.thread_count, 2],
        [3, said.max_frame, said.timeout_async, said.timeout_sync, said.timeout_terminate, said.keepalive],
        -4,
        "/fake/",
    );
    assert_eq!(got, want);
    drop(api);
    core.join();
}

#[test]
fn an_error_instead_of_welcome_is_returned_with_its_status() {
    let said =
        Said { refuse: Some((Status::Unauthorized.code(), "unmanaged instances are refused")), ..Said::default() };
    let core = FakeCore::start(said, |_| {});
    let e = Api::connect(Options::unmanaged(core.socket.clone(), "/fake/")).err().expect("connect must fail");
    match e {
        Error::Status { status, message } => {
            assert_eq!(status, Status::Unauthorized);
            assert_eq!(message, "unmanaged instances are refused");
        }
        other => panic!("{other}"),
    }
    core.join();
}

#[test]
fn close_writes_what_is_buffered_then_goodbye() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        let f = peer.expect(kind::SEND_ASYNC);
        let Ok(Frame::SendAsync(s)) = cumulo_proto::decode(&f) else { panic!() };
        assert_eq!((s.name, s.request), ("/queued", &b"not yet written"[..]));
        peer.expect_goodbye_and_close();
    });
    // send_async only queues: closing must still deliver it.
    api.send_async("/queued", b"", b"not yet written", SendOptions::default());
    api.close().unwrap();
    core.join();
}

#[test]
fn dropping_an_instance_says_goodbye() {
    let (core, api) = FakeCore::with_api(|peer| peer.expect_goodbye_and_close());
    drop(api);
    core.join();
}

#[test]
fn terminate_ends_poll_after_the_requests_already_received() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        // A request and TERMINATE in one write: the request is still served.
        let r = request(tid(1), "/fake/a", b"last");
        peer.write(|b| {
            cumulo_proto::encode_request(b, &r);
            cumulo_proto::encode_terminate(b, 7003);
        });
        assert_eq!(returned(&peer.expect(kind::RETURN)), (0, vec![], b"served last".to_vec()));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("a", |_, req| Ok(Answer::body([&b"served "[..], req.request].concat()))).unwrap();
    assert!(!api.poll(None).unwrap(), "poll returns false after TERMINATE");
    assert!(api.terminated());
    drop(api);
    core.join();
}

#[test]
fn an_error_from_the_core_is_returned_with_its_status() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.expect(kind::SUBSCRIBE);
        peer.write(|b| cumulo_proto::encode_error(b, Status::Protocol.code(), "you said something odd"));
    });
    match api.subscribe("a", |_, _| Ok(Answer::body(""))) {
        Err(Error::Status { status: Status::Protocol, message }) => assert_eq!(message, "you said something odd"),
        other => panic!("{other:?}"),
    }
    drop(api);
    core.join();
}

#[test]
fn a_frame_the_core_never_sends_is_a_protocol_error() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        let hello = cumulo_proto::Hello { version: 1, window: 1, thread_index: 0, token: "", prefix: "/x/" };
        peer.write(|b| cumulo_proto::encode_hello(b, &hello));
    });
    match api.poll(None) {
        Err(Error::Protocol(m)) => assert!(m.contains("HELLO"), "{m}"),
        other => panic!("{other:?}"),
    }
    drop(api);
    core.join();
}
