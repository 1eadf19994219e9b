//! A handler that fails or panics: the sender gets SERVICE_ERROR with the
//! handler's message, and the instance keeps serving.

use cumulo_e2e::*;

fn message<T: std::fmt::Debug>(r: cumulo::Result<T>) -> String {
    match r {
        Err(Error::Status { status: Status::ServiceError, message }) => message,
        other => panic!("expected SERVICE_ERROR, got {other:?}"),
    }
}

#[test]
fn failures_and_panics_become_service_error() {
    let core = Core::start(Config::new().service(ts!("/e/")));
    let mut api = core.client();
    assert!(message(api.send_sync("/e/x", b"", b"fail", opts(5000))).contains("failing as asked"));
    assert!(message(api.send_sync("/e/x", b"", b"panic", opts(5000))).contains("panicking as asked"));
    let r = api.send_sync("/e/x", b"", b"fine", opts(5000)).unwrap();
    assert_eq!(field(&r, "seq"), "3", "the same instance served all three");
    assert_eq!(core.service_pids().len(), 1, "no restart");
}

#[test]
fn a_service_that_always_fails() {
    let core = Core::start(Config::new().service(ts!("/e/").mode("error")));
    let mut api = core.client();
    for _ in 0..3 {
        assert!(message(api.send_sync("/e/x", b"", b"", opts(5000))).contains("/e/ always fails"));
    }
}
