//! WAIT_FOR_SERVICE: a request for a name nobody serves yet waits for a
//! subscriber, up to its timeout.

use cumulo_e2e::*;
use std::time::Instant;

fn wait_opts(timeout: u32) -> SendOptions {
    SendOptions { timeout, wait_for_service: true, ..Default::default() }
}

#[test]
fn a_late_subscriber_gets_the_waiting_request() {
    let core = Core::start(Config::new());
    let socket = core.socket_str();
    let late = std::thread::spawn(move || {
        std::thread::sleep(ms(700));
        let mut api = Api::connect(Options::unmanaged(socket, "/late/")).unwrap();
        let served = std::rc::Rc::new(std::cell::Cell::new(false));
        let done = served.clone();
        api.subscribe("x", move |_, req| {
            done.set(true);
            Ok(cumulo::Answer::body([b"late:", req.request].concat()))
        })
        .unwrap();
        let t = Instant::now();
        while !served.get() && t.elapsed() < ms(10_000) {
            api.poll(Some(ms(100))).unwrap();
        }
        api.flush().unwrap();
    });
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/late/x", b"", b"hi", wait_opts(8000)).unwrap();
    assert_eq!(r.body, b"late:hi");
    assert!(t.elapsed() >= ms(650), "answered after {:?}, before the subscriber existed", t.elapsed());
    late.join().unwrap();
}

#[test]
fn a_managed_service_started_later_gets_it() {
    let core = Core::start(Config::new().service(ts!("/slowstart/").env("TS_START_DELAY_MS", 800).no_wait()));
    let mut api = core.client();
    let r = api.send_sync("/slowstart/x", b"", b"", wait_opts(10_000)).unwrap();
    assert_eq!(field(&r, "tag"), "/slowstart/");
}

#[test]
fn nobody_comes_means_timeout_not_no_service() {
    let core = Core::start(Config::new());
    let mut api = core.client();
    let t = Instant::now();
    let r = api.send_sync("/never/x", b"", b"", wait_opts(600));
    assert_eq!(status(&r), Status::Timeout);
    assert!(t.elapsed() >= ms(580) && t.elapsed() < ms(2000), "took {:?}", t.elapsed());
}
