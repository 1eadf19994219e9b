//! `health_check` end to end: a web server on loopback stopped and started
//! again, and a name that does not resolve, watched by the real core; the
//! state read by name, the changes received by a subscriber.

use cumulo::{Answer, Request};
use cumulo_e2e::*;
use serde_json::Value;
use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An HTTP server answering 200 to every connection until stopped.
struct Web {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Web {
    fn start(port: u16) -> Web {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the web server's port");
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    return; // the listener closes with the thread
                }
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(ms(1000)));
                let _ = s.read(&mut [0; 4096]);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
            }
        });
        Web { port, stop, thread: Some(thread) }
    }

    fn stop(mut self) -> u16 {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept
        self.thread.take().unwrap().join().unwrap();
        self.port
    }
}

fn hosts(api: &mut Api) -> Value {
    let r = api.send_sync("/health/hosts.json/get", b"", b"", opts(5000)).expect("hosts.json");
    assert_eq!(info(&r.info)["content-type"], "application/json");
    serde_json::from_slice(&r.body).unwrap()
}

fn host(v: &Value, name: &str) -> Value {
    v["hosts"].as_array().unwrap().iter().find(|h| h["name"] == name).cloned().unwrap_or_else(|| panic!("{v}"))
}

type Changes = Rc<RefCell<Vec<(String, String, Value)>>>;

/// Polls `watcher` until `cond` holds on the changes received.
fn until(watcher: &mut Api, changes: &Changes, what: &str, cond: impl Fn(&[(String, String, Value)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond(&changes.borrow()) {
        assert!(Instant::now() < deadline, "no {what} within 10 s; changes so far: {:?}", changes.borrow());
        watcher.poll(Some(ms(50))).unwrap();
    }
}

#[test]
fn health_check_tells_when_a_host_goes_down_and_comes_back_and_serves_their_state() {
    let web = Web::start(0);
    let port = web.port;
    let settings = format!(
        "{{ interval_ms = 200, timeout_ms = 150, notify = [\"/watch/changes\"], hosts = [\
         {{ name = \"web\", url = \"http://127.0.0.1:{port}/\" }}, \
         {{ name = \"port\", tcp = \"127.0.0.1:{port}\" }}, \
         {{ name = \"nowhere\", url = \"http://nosuch.invalid/\" }}] }}"
    );
    let core = Core::start(Config::new().service(
        Service::internal("/health/", "health_check").set("settings", settings).probe("/health/hosts.json/get"),
    ));
    let mut watcher = core.client_with_prefix("/watch/");
    let changes: Changes = Rc::default();
    let got = changes.clone();
    watcher
        .subscribe("changes", move |_, req: &Request<'_>| {
            let i = info(req.request_info);
            let body: Value = serde_json::from_slice(req.request).unwrap();
            got.borrow_mut().push((i["health_check_host"].clone(), i["health_check_state"].clone(), body));
            Ok(Answer::body(b"noted".to_vec()))
        })
        .unwrap();
    let mut api = core.client();

    // a name that does not resolve is down from its first check, and says why
    until(&mut watcher, &changes, "'nowhere' down", |c| c.iter().any(|(h, s, _)| h == "nowhere" && s == "down"));
    let nowhere = changes.borrow().iter().find(|(h, _, _)| h == "nowhere").unwrap().2.clone();
    assert_eq!(nowhere["error"], "dns", "{nowhere}");
    let v = hosts(&mut api);
    assert_eq!(host(&v, "nowhere")["state"], "down", "{v}");
    assert_eq!(host(&v, "nowhere")["last_error"]["kind"], "dns", "{v}");
    assert_eq!(host(&v, "web")["state"], "up", "{v}");
    assert_eq!(host(&v, "port")["state"], "up", "{v}");
    assert!(!changes.borrow().iter().any(|(h, _, _)| h == "web"), "up from the start is no news");

    // the server stops: both checks of it fail, connection refused
    let port = web.stop();
    let down = Instant::now();
    until(&mut watcher, &changes, "'web' down", |c| c.iter().any(|(h, s, _)| h == "web" && s == "down"));
    until(&mut watcher, &changes, "'port' down", |c| c.iter().any(|(h, s, _)| h == "port" && s == "down"));
    let web_down = changes.borrow().iter().find(|(h, _, _)| h == "web").unwrap().2.clone();
    assert_eq!(web_down["error"], "connect", "{web_down}");
    assert_eq!(host(&hosts(&mut api), "web")["state"], "down");

    // and comes back: up again, with how long it was down
    std::thread::sleep(ms(300));
    let _web = Web::start(port);
    until(&mut watcher, &changes, "'web' up", |c| c.iter().any(|(h, s, _)| h == "web" && s == "up"));
    let up = changes.borrow().iter().find(|(h, s, _)| h == "web" && s == "up").unwrap().2.clone();
    let down_ms = up["down_ms"].as_u64().unwrap();
    assert!(down_ms >= 300 && down_ms <= down.elapsed().as_millis() as u64 + 500, "down_ms {down_ms}: {up}");
    let v = hosts(&mut api);
    assert_eq!(host(&v, "web")["state"], "up", "{v}");
    assert_eq!(host(&v, "nowhere")["state"], "down", "{v}");
    assert!(host(&v, "web")["failed"].as_u64().unwrap() >= 1, "{v}");
}
