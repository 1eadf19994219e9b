//! Per-node series of `GET /metrics` (label `node`): what this node sent to
//! each other node and how it went, and what each sent here. A node's
//! counters start again from zero when it rejoins (Prometheus treats that as
//! a counter reset).

use super::members::Membership;
use cumulo_router::Core;
use cumulo_router::PromText;

pub fn render(p: &mut PromText, core: &Core, m: &Membership) {
    let members: Vec<_> = m.members.values().collect();
    let labels = |name: &str| [("node", name.to_string())];
    macro_rules! per_node {
        ($name:expr, $kind:expr, $help:expr, |$n:ident| $value:expr) => {
            p.header($name, $kind, $help);
            for $n in &members {
                let l = labels(&$n.name);
                p.sample($name, &[(l[0].0, l[0].1.as_str())], $value);
            }
        };
    }
    p.header("cumulo_cluster_connected", "gauge", "1 while connected to a NATS server.");
    p.sample("cumulo_cluster_connected", &[], m.connected as u64);
    p.header("cumulo_cluster_nodes", "gauge", "Other nodes of the cloud known now.");
    p.sample("cumulo_cluster_nodes", &[], members.len() as u64);
    p.header("cumulo_cluster_nodes_purged_total", "counter", "Nodes purged after purge_ms of silence.");
    p.sample("cumulo_cluster_nodes_purged_total", &[], m.purged);
    per_node!("cumulo_node_requests_sent_total", "counter", "Requests this node routed to the node.", |n| n
        .metrics
        .received
        .get());
    per_node!("cumulo_node_requests_received_total", "counter", "Requests the node sent here to be served.", |n| n
        .metrics
        .sent
        .get());
    per_node!("cumulo_node_requests_in_flight", "gauge", "Requests delivered to the node and not answered yet.", |n| {
        core.instance(&n.instance).map_or(0, |i| i.in_flight())
    });
    per_node!(
        "cumulo_node_subscriptions",
        "gauge",
        "The node's subscriptions (pattern × instance) known here.",
        |n| n.subscriptions()
    );
    p.header("cumulo_node_responses_total", "counter", "Answers from the node to requests sent there, by status.");
    for n in &members {
        p.by_status("cumulo_node_responses_total", &[("node", &n.name)], &n.metrics.responses);
    }
    p.header(
        "cumulo_node_request_errors_total",
        "counter",
        "Requests sent to the node that ended here with an error (TIMEOUT, CRASHED when it was lost, QUEUE_FULL).",
    );
    for n in &members {
        p.by_status("cumulo_node_request_errors_total", &[("node", &n.name)], &n.metrics.errors);
    }
    p.header(
        "cumulo_node_request_duration_seconds",
        "histogram",
        "Time from a request's acceptance here to the node's answer arriving here.",
    );
    for n in &members {
        p.histogram("cumulo_node_request_duration_seconds", &[("node", &n.name)], &n.metrics.duration);
    }
}
