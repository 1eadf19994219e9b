//! Serving: what a handler sees, and the RETURN (or FORWARD) it becomes:
//! NO_SERVICE without a handler, SERVICE_ERROR when it fails, TOO_LARGE
//! when its answer is over the core's limit.

use super::fake_core::{request, returned, tid, FakeCore, Said};
use crate::{Answer, Status};
use cumulo_proto::{decode, kind, Frame};
use std::cell::RefCell;
use std::rc::Rc;

#[test]
fn a_request_without_a_handler_is_answered_no_service_and_serving_goes_on() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let f = peer.request(tid(1), "/fake/nobody", b"");
        assert_eq!(returned(&f), (Status::NoService.code(), vec![], b"no handler for pattern /fake/nobody".to_vec()));
        assert_eq!(returned(&peer.request(tid(2), "/fake/a", b"")), (0, vec![], b"a".to_vec()));
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("a", |_, _| Ok(Answer::body("a"))).unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}

#[test]
fn a_request_racing_an_unsubscribe_is_answered_no_service() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        peer.reply_to_control(kind::UNSUBSCRIBE, 0);
        peer.reply_to_control(kind::SUBSCRIBE_COUNT, 0);
        let f = peer.request(tid(1), "/fake/a", b"");
        assert_eq!(returned(&f).0, Status::NoService.code());
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("a", |_, _| Ok(Answer::body("a"))).unwrap();
    api.unsubscribe("a").unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}

#[test]
fn a_failing_or_panicking_handler_is_answered_service_error_and_serving_goes_on() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let err = returned(&peer.request(tid(1), "/fake/fails", b""));
        assert_eq!(err, (Status::ServiceError.code(), vec![], b"bad input".to_vec()));
        let panicked = returned(&peer.request(tid(2), "/fake/panics", b""));
        assert_eq!(panicked, (Status::ServiceError.code(), vec![], b"handler panicked: boom".to_vec()));
        assert_eq!(returned(&peer.request(tid(3), "/fake/fails", b"ok")).0, 0);
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("fails", |_, req| if req.request == b"ok" { Ok(Answer::body("")) } else { Err("bad input".into()) })
        .unwrap();
    api.subscribe("panics", |_, _| panic!("boom")).unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}

#[test]
fn the_handler_sees_every_field_of_the_request() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let mut r = request(tid(4), "/fake/*", b"body");
        r.name = "/fake/x/y";
        r.request_info = b"k\0v\0";
        peer.write(|b| cumulo_proto::encode_request(b, &r));
        let (status, info, body) = returned(&peer.expect(kind::RETURN));
        assert_eq!((status, info, body), (0, b"h\0v\0".to_vec(), b"answer".to_vec()));
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    let log = seen.clone();
    api.subscribe("*", move |_, req| {
        let fields = (req.name, req.pattern, req.request_info, req.request, req.timeout, req.priority, req.source);
        log.borrow_mut().push(format!("{fields:?} {} {}", req.trans_id == tid(4), req.sync));
        Ok(Answer::with_info(&b"h\0v\0"[..], "answer"))
    })
    .unwrap();
    assert!(!api.poll(None).unwrap());
    let want = format!(
        "{:?} true true",
        ("/fake/x/y", "/fake/*", &b"k\0v\0"[..], &b"body"[..], 5000u32, 2i8, (9u64 << 32) | 2)
    );
    assert_eq!(*seen.borrow(), vec![want]);
    drop(api);
    core.join();
}

#[test]
fn a_forward_keeps_the_trans_id_and_by_default_the_priority() {
    let (core, mut api) = FakeCore::with_api(|peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let f = peer.request(tid(6), "/fake/f", b"in");
        match decode(&f).unwrap() {
            Frame::Forward(s) => {
                assert_eq!(
                    (s.trans_id, s.name, s.request, s.priority, s.timeout),
                    (tid(6), "/next", &b"out"[..], 2, 0)
                );
            }
            other => panic!("{other:?}"),
        }
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("f", |_, _| Ok(Answer::forward("/next", "", "out"))).unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}

#[test]
fn an_answer_over_the_core_frame_limit_becomes_too_large() {
    let said = Said { max_frame: 1024, ..Said::default() };
    let (core, mut api) = FakeCore::with_api_said(said, |peer| {
        peer.reply_to_control(kind::SUBSCRIBE, 0);
        let (status, _, message) = returned(&peer.request(tid(1), "/fake/big", b""));
        assert_eq!(status, Status::TooLarge.code(), "{}", String::from_utf8_lossy(&message));
        peer.write(|b| cumulo_proto::encode_terminate(b, 100));
        peer.expect_goodbye_and_close();
    });
    api.subscribe("big", |_, _| Ok(Answer::body(vec![0u8; 4096]))).unwrap();
    assert!(!api.poll(None).unwrap());
    drop(api);
    core.join();
}
