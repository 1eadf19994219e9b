//! forward: a service passes a request on; the original sender gets the
//! final answer within the original deadline.

use cumulo_e2e::*;
use std::time::Instant;

fn forwarder(to: &str, delay_ms: u32) -> Service {
    ts!("/front/").mode("forward").env("TS_FORWARD_TO", to).env("TS_SLEEP_MS", delay_ms)
}

#[test]
fn the_answer_comes_from_the_second_service() {
    let cfg = Config::new().service(forwarder("/back/x", 0)).service(ts!("/back/"));
    let core = Core::start(cfg);
    let mut api = core.client();
    let r = api.send_sync("/front/a", b"", b"through", opts(5000)).unwrap();
    assert_eq!(field(&r, "tag"), "/back/");
    assert_eq!(field(&r, "name"), "/back/x");
    assert_eq!(r.body, b"through");
    assert_eq!(field(&r, "sync"), "1", "the forwarded request keeps the sync flag");
    let source = ((api.node_id as u64) << 32) | api.instance_id as u64;
    assert_eq!(field(&r, "source"), source.to_string(), "the original sender stays the sender");
}

#[test]
fn the_forwarded_request_has_only_the_time_left() {
    let cfg = Config::new().service(forwarder("/back/x", 400)).service(ts!("/back/"));
    let core = Core::start(cfg);
    let mut api = core.client();
    let r = api.send_sync("/front/a", b"", b"", opts(2000)).unwrap();
    let left: u32 = field(&r, "timeout").parse().unwrap();
    assert!(left <= 1600 && left > 0, "after 400 ms of a 2000 ms timeout, the second service saw {left} ms");
}

#[test]
fn a_forward_to_a_slow_service_times_out_at_the_original_deadline() {
    let cfg =
        Config::new().service(forwarder("/back/x", 0)).service(ts!("/back/").mode("sleep").env("TS_SLEEP_MS", 4000));
    let core = Core::start(cfg);
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/front/a", b"", b"", opts(1000));
    let took = t.elapsed();
    assert_eq!(status(&r), Status::Timeout);
    assert!(took >= ms(950) && took < ms(2500), "TIMEOUT after {took:?}, expected about 1 s");
}

#[test]
fn a_forward_to_nobody_answers_the_original_sender_with_no_service() {
    let core = Core::start(Config::new().service(forwarder("/nobody/x", 0)));
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/front/a", b"", b"", opts(5000));
    assert_eq!(status(&r), Status::NoService);
    assert!(t.elapsed() < ms(2000), "NO_SERVICE must be immediate, took {:?}", t.elapsed());
}
