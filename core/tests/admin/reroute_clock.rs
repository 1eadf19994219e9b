//! A rerouted request carries its real time left. A request queued at an
//! instance that goes away (its service removed through the admin API, its
//! process killed) is routed again to another instance; the timeout that
//! instance is handed must be read from the clock at the reroute, not from
//! the last time the core read a frame, which may be long before.

use crate::common::*;
use cumulo::{Answer, SendOptions};
use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

const NAME: &str = "/slow/slow/get";
const TIMEOUT_MS: u32 = 20_000;
/// How long the core stays idle (no frame read) before the reroute.
const IDLE: Duration = Duration::from_millis(2_000);

/// One process of the slow Python service, which holds each request a minute.
fn slow_service() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/loadgen/slow_service.py");
    format!(
        "[[service]]\nprefix = \"/slow/\"\npath = \"python3\"\nargs = [{}]\ntimeout_terminate = 500\n\
         env = {{ SLOW_DELAY_MS = \"60000\" }}\n",
        toml_str(&script)
    )
}

struct Setup {
    core: TestCore,
    _client: cumulo::Api,
    backup: cumulo::Api,
    /// The timeout the backup instance was handed with the request.
    seen: Rc<Cell<Option<u32>>>,
    /// By then the core had accepted the queued request.
    accepted_by: Instant,
}

/// The managed instance holds one request and has a second queued; a second
/// instance (unmanaged) subscribes the same name; then the core idles. Its
/// keep-alive round is a minute, so nothing in that time reads its clock.
fn setup() -> Setup {
    let core = TestCore::start_keepalive(&slow_service(), None, 60_000);
    core.wait_running(1, 1);
    core.wait_subscribed(NAME, 1);
    let mut client = core.client("/test/client/");
    let o = SendOptions { timeout: TIMEOUT_MS, ..SendOptions::default() };
    client.send_async(NAME, b"", b"held", o);
    client.send_async(NAME, b"", b"queued", o);
    client.flush().unwrap();
    core.wait_service(1, "holding one request with one queued", |v| v["queued"] == 1);
    let accepted_by = Instant::now();

    let mut backup = core.client("/slow/");
    let seen = Rc::new(Cell::new(None));
    let record = seen.clone();
    backup
        .subscribe("slow/get", move |_, r| {
            record.set(Some(r.timeout));
            Ok(Answer::body("backup"))
        })
        .unwrap();
    core.wait_subscribed(NAME, 2);
    std::thread::sleep(IDLE);
    Setup { core, _client: client, backup, seen, accepted_by }
}

/// Serves the backup until it was handed the rerouted request; checks the
/// timeout it got against the time that has passed since the request was
/// accepted, at least until `rerouted_after`.
fn check_time_left(mut s: Setup, rerouted_after: Instant) {
    let end = Instant::now() + Duration::from_secs(10);
    while s.seen.get().is_none() {
        assert!(Instant::now() < end, "the queued request did not reach the other instance:\n{}", s.core.log_text());
        s.backup.poll(Some(Duration::from_millis(50))).unwrap();
    }
    let got = s.seen.get().unwrap();
    let passed = rerouted_after.duration_since(s.accepted_by).as_millis() as u32;
    assert!(passed >= IDLE.as_millis() as u32);
    // One millisecond of rounding up in the time left.
    assert!(
        got <= TIMEOUT_MS - passed + 1,
        "the rerouted request was handed {got} ms left, though at least {passed} ms of its {TIMEOUT_MS} had passed"
    );
    assert!(got > 0, "the rerouted request must still have time left");
}

#[test]
fn a_request_rerouted_when_the_admin_api_removes_its_service_keeps_its_real_time_left() {
    let s = setup();
    let rerouted_after = Instant::now();
    let r = s.core.http("DELETE", "/v1/services/1", None);
    assert_eq!(r.status, 200, "{}", r.body);
    check_time_left(s, rerouted_after);
}

#[test]
fn a_request_rerouted_when_its_process_dies_keeps_its_real_time_left() {
    let s = setup();
    let pid = s.core.get("/v1/services/1")["processes"][0]["pid"].as_u64().expect("the process's pid");
    let rerouted_after = Instant::now();
    let killed = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    check_time_left(s, rerouted_after);
}
