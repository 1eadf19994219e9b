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

#[test]
fn all_nats_gone_local_routing_goes_on_remote_names_fail_fast_and_the_cloud_heals() {
    let mut nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(tagged!("/b/", "b")));
    let a = Core::start(node(&urls, "a", 1).service(tagged!("/local/", "a")));
    let mut api = a.client();
    wait_reachable(&mut api, "/b/x", ms(10_000));

    nats.kill();
    a.wait_lines(&["NATS connection lost"], 1, ms(5000));
    // local routing is untouched
    for _ in 0..20 {
        let r = api.send_sync("/local/x", b"", b"", opts(2000)).unwrap();
        assert_eq!(field(&r, "tag"), "a");
    }
    // a remote name is an explicit error at once, not a timeout
    let t0 = Instant::now();
    assert_eq!(status(&api.send_sync("/b/x", b"", b"", opts(5000))), Status::NoService);
    assert!(t0.elapsed() < ms(1000));

    // NATS is back on the same port: the cloud heals by itself
    nats.restart();
    let r = wait_reachable(&mut api, "/b/x", ms(15_000));
    assert_eq!(field(&r, "tag"), "b");
}

#[test]
fn kill_9_of_one_nats_server_of_three_under_load_every_request_is_accounted_for() {
    let mut nats = NatsCluster::start(3);
    let urls = nats.urls();
    // a is on server 0 only (it learns the others from it), b on 1 and 2:
    // killing server 0 cuts a off until its client moves to another one
    let _b = Core::start(node(&urls[1..], "b", 2).service(tagged!("/k/", "b").set("count_process", 2)));
    let a = Core::start(node(&urls[..1], "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/k/x", ms(15_000));
    let load = Load::start(&a, "/k/x", 50, ms(8000), ms(3000));
    load.wait_running();
    std::thread::sleep(ms(2000));
    nats.servers[0].kill();
    a.wait_lines(&["NATS connection lost"], 1, ms(5000));
    a.wait_lines(&["cluster: connected to NATS"], 2, ms(10_000));
    let report = load.finish();
    report.assert_accounted();
    report.assert_error_kinds(&["CRASHED", "NO_SERVICE", "TIMEOUT"]);
    // served again after the fault: the last ticks are all answered
    let last = report.ticks.last().expect("ticks");
    assert!(last.ok > 0 && last.errors == 0 && last.timeouts == 0, "not healed by the end: {:?}", report.ticks);
}

#[test]
fn a_partition_by_a_hung_nats_server_heals_and_every_request_is_accounted_for() {
    let nats = NatsCluster::start(2);
    let urls = nats.urls();
    // a on server 0, b on server 1: stopping server 1 cuts b off
    let b = Core::start(node(&urls[1..], "b", 2).service(tagged!("/p/", "b").set("count_process", 2)));
    let a = Core::start(node(&urls[..1], "a", 1));
    let mut api = a.client();
    wait_reachable(&mut api, "/p/x", ms(15_000));
    let load = Load::start(&a, "/p/x", 40, ms(9000), ms(3000));
    load.wait_running();
    std::thread::sleep(ms(2000));
    nats.servers[1].pause(true);
    // a purges the silent b; b notices its server hung and moves
    a.wait_lines(&["node b was silent", "purged"], 1, ms(PURGE_MS as u64 * 5));
    b.wait_lines(&["NATS connection lost"], 1, ms(10_000));
    nats.servers[1].pause(false);
    // healed: b joins again (a new incarnation after its reconnection)
    a.wait_lines(&["node b joined"], 2, ms(10_000));
    let report = load.finish();
    report.assert_accounted();
    report.assert_error_kinds(&["CRASHED", "NO_SERVICE", "TIMEOUT"]);
    let last = report.ticks.last().expect("ticks");
    assert!(last.ok > 0 && last.errors == 0 && last.timeouts == 0, "not healed by the end: {:?}", report.ticks);
}
