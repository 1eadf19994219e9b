//! Losing a node: what was in flight there ends at once (when the node is
//! purged), not at its timeout; every request is accounted for.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;
use std::time::Instant;

#[test]
fn kill_9_of_a_node_under_load_fails_its_in_flight_requests_at_once() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    // b's instances each hold a request 300 ms: at any time some are in
    // flight on b, and a's sender waits for them
    let b = Core::start(node(&urls, "b", 2).service(
        tagged!("/k/", "b").set("count_process", 2).mode("sleep").env("TS_SLEEP_MS", 300).env("TS_WINDOW", 8),
    ));
    let a = Core::start(node(&urls, "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/k/x", ms(10_000));
    // a long timeout: a request that waited for it instead of failing at
    // the purge would show as timed out
    let load = Load::start(&a, "/k/x", 40, ms(6000), ms(20_000));
    load.wait_running();
    std::thread::sleep(ms(2000));
    let killed = Instant::now();
    b.signal(libc::SIGKILL);
    a.wait_lines(&["node b was silent", "purged"], 1, ms(PURGE_MS as u64 * 5));
    let purge_seen = killed.elapsed();
    let report = load.finish();
    report.assert_accounted();
    assert_eq!(report.totals.timed_out, 0, "in-flight requests to b waited for their timeout: {:?}", report.totals);
    assert!(report.errors("CRASHED") > 0, "requests in flight on b fail with CRASHED: {:?}", report.totals);
    report.assert_error_kinds(&["CRASHED", "NO_SERVICE"]);
    assert!(report.totals.ok > 0);
    assert!(purge_seen < ms(PURGE_MS as u64 * 3), "purged after {purge_seen:?}");
    // the CRASHED message names the node
    let mut probe = a.client();
    assert_eq!(status(&probe.send_sync("/k/x", b"", b"", opts(1000))), Status::NoService);
    drop(b);
}
