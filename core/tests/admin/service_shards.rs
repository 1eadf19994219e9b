//! Service processes with the core on two threads (`core.threads = 2`):
//! each process's connection is handed after its HELLO to the shard that
//! serves it (process 0 on shard 0, process 1 on shard 1), shown as the
//! process's `shards` in the admin API; a killed process is restarted and
//! served again there, and a removed service goes away.

use crate::common::*;
use cumulo::SendOptions;
use std::time::{Duration, Instant};

/// The shard of each process's instance, in process order.
fn shards(core: &TestCore) -> Vec<Vec<u64>> {
    let v = core.get("/v1/services/1");
    let procs = v["processes"].as_array().cloned().unwrap_or_default();
    procs
        .iter()
        .map(|p| p["shards"].as_array().map_or(vec![], |a| a.iter().filter_map(|s| s.as_u64()).collect()))
        .collect()
}

fn wait_shards(core: &TestCore, want: &[Vec<u64>]) {
    let end = Instant::now() + Duration::from_secs(20);
    while shards(core) != want {
        assert!(Instant::now() < end, "shards {:?}, want {want:?}", shards(core));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn answered(core: &TestCore) {
    let mut client = core.client("/test/client/");
    for n in 0..20 {
        let r = client.send_sync("/tests/http_req/rust.xml/get", b"", &value_request(n), SendOptions::default());
        assert!(r.is_ok(), "{r:?}");
    }
}

#[test]
fn two_processes_are_served_by_two_shards_restarted_there_and_removed() {
    let core = TestCore::start_spread(&http_req_service(2), 2);
    core.wait_running(1, 2);
    core.wait_subscribed("/tests/http_req/rust.xml/get", 2);
    wait_shards(&core, &[vec![0], vec![1]]);
    answered(&core);

    // Process 1 (on shard 1) killed: restarted, handed to shard 1 again.
    let pid = core.get("/v1/services/1")["processes"][1]["pid"].as_u64().expect("a pid");
    let killed = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    core.wait_service(1, "process 1 restarted", |v| {
        v["processes"][1]["pid"].as_u64().is_some_and(|p| p != pid) && v["processes"][1]["instances"] == 1
    });
    core.wait_running(1, 2);
    wait_shards(&core, &[vec![0], vec![1]]);
    core.wait_subscribed("/tests/http_req/rust.xml/get", 2);
    answered(&core);

    let r = core.http("DELETE", "/v1/services/1", None);
    assert!(r.status < 300, "{} {}", r.status, r.body);
    let mut client = core.client("/test/client/");
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let r = client.send_sync("/tests/http_req/rust.xml/get", b"", &value_request(1), SendOptions::default());
        if matches!(r, Err(cumulo::Error::Status { status: cumulo::Status::NoService, .. })) {
            break;
        }
        assert!(Instant::now() < end, "still served after removal: {r:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
