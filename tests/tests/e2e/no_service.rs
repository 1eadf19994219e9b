//! NO_SERVICE: a name nobody serves fails at once, unlike a TIMEOUT.

use cumulo_e2e::*;
use std::time::Instant;

#[test]
fn no_service_is_immediate_and_not_a_timeout() {
    let core = Core::start(Config::new().service(ts!("/slow/").mode("hang").set("timeout_terminate", 200)));
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/nobody/x", b"", b"", opts(5000));
    let fast = t.elapsed();
    assert_eq!(status(&r), Status::NoService);
    assert!(fast < ms(1000), "NO_SERVICE took {fast:?} of a 5 s timeout");
    let Err(Error::Status { message, .. }) = r else { unreachable!() };
    assert!(message.contains("/nobody/x"), "the message names the name: {message}");

    let t = Instant::now();
    let r = api.send_sync("/slow/x", b"", b"", opts(600));
    assert_eq!(status(&r), Status::Timeout);
    assert!(t.elapsed() >= ms(580));
}

#[test]
fn a_name_outside_every_pattern_under_a_served_prefix_is_no_service() {
    let core = Core::start(Config::new().service(ts!("/p/").env("TS_PATTERNS", "only")));
    let mut api = core.client();
    assert!(api.send_sync("/p/only", b"", b"", opts(5000)).is_ok());
    assert_eq!(status(&api.send_sync("/p/other", b"", b"", opts(5000))), Status::NoService);
    assert_eq!(status(&api.send_sync("/p/onlyx", b"", b"", opts(5000))), Status::NoService);
}
