//! Resiliency policies across nodes: when the local instance fails, a
//! retry goes to another node (dest_refresh closest), and the answer comes
//! from there.

use crate::common::*;
use crate::tagged;
use cumulo_e2e::*;

fn chaos(prefix: &str, settings: &str) -> Service {
    Service::internal(prefix, "chaos").set("settings", format!("{{ {settings} }}"))
}

#[test]
fn a_retry_goes_to_another_node_when_the_local_instance_fails() {
    let nats = NatsServer::start(None);
    let urls = [nats.url()];
    let _b = Core::start(node(&urls, "b", 2).service(chaos("/n/", "fail = 0.0")).service(tagged!("/only_b/", "b")));
    let policy = "[[policy]]\nname = \"n\"\ndestinations = [\"/n/*\"]\n\
                  [policy.retry]\nmax_retries = 1\ninterval_ms = 5\non = [\"SERVICE_ERROR\"]\n";
    let a = Core::start(
        node(&urls, "a", 1)
            .unmanaged("dest_refresh", q("immediate_closest"))
            .service(chaos("/n/", "fail = 1.0"))
            .table(policy),
    );
    let mut api = a.client();
    wait_reachable(&mut api, "/only_b/x", ms(10_000));
    for i in 0..50 {
        let r = api.send_sync("/n/x", b"", format!("{i}").as_bytes(), opts(5000));
        assert_eq!(status(&r), Status::Ok, "request {i}: the local instance fails, node b answers the retry");
        assert_eq!(r.unwrap().body, format!("{i}").into_bytes());
    }
}
