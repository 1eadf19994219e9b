//! SUBSCRIBE / UNSUBSCRIBE / SUBSCRIBE_COUNT as seen through routing.

use cumulo_e2e::*;
use std::collections::HashMap;

fn handler(tag: &'static str) -> impl FnMut(&mut Api, &cumulo::Request<'_>) -> cumulo::HandlerResult {
    move |_, _| Ok(cumulo::Answer::body(tag))
}

/// Serves `/s/x` from a thread subscribed `times` times, until `stop` exists.
fn server(socket: String, tag: &'static str, times: u32, stop: std::path::PathBuf) -> std::thread::JoinHandle<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let mut api = Api::connect(Options::unmanaged(socket, "/s/")).unwrap();
        for _ in 0..times {
            api.subscribe("x", handler(tag)).unwrap();
        }
        assert_eq!(api.subscribe_count("x").unwrap(), times);
        tx.send(()).unwrap();
        while !stop.exists() {
            api.poll(Some(ms(50))).unwrap();
        }
    });
    rx.recv().unwrap();
    h
}

#[test]
fn subscribing_twice_doubles_the_share() {
    let core = Core::start(Config::new().unmanaged("dest_refresh", q("round_robin")));
    let stop = core.dir.0.join("stop");
    let a = server(core.socket_str(), "a", 2, stop.clone());
    let b = server(core.socket_str(), "b", 1, stop.clone());
    let mut api = core.client();
    let mut count: HashMap<Vec<u8>, u32> = HashMap::new();
    for _ in 0..30 {
        *count.entry(api.send_sync("/s/x", b"", b"", opts(5000)).unwrap().body).or_default() += 1;
    }
    assert_eq!((count[&b"a".to_vec()], count[&b"b".to_vec()]), (20, 10));
    std::fs::write(&stop, "").unwrap();
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn unsubscribe_stops_the_traffic() {
    let core = Core::start(Config::new());
    let mut srv = core.client_with_prefix("/s/");
    srv.subscribe("x", handler("a")).unwrap();
    srv.subscribe("x", handler("a")).unwrap();
    assert_eq!(srv.subscribe_count("x").unwrap(), 2);
    assert_eq!(srv.subscribe_count("y").unwrap(), 0);
    srv.unsubscribe("x").unwrap();
    assert_eq!(srv.subscribe_count("x").unwrap(), 1);
    srv.unsubscribe("x").unwrap();
    assert_eq!(status(&srv.unsubscribe("x")), Status::InvalidArgument, "not subscribed any more");
    let mut api = core.client();
    assert_eq!(status(&api.send_sync("/s/x", b"", b"", opts(5000))), Status::NoService);
}
