//! `GET /metrics`: the Prometheus text format, per service (labels
//! `service` = prefix and `service_id`; unmanaged instances as
//! `service_id="unmanaged"`), then core-wide and process metrics.

use super::{views, AdminContext};
use crate::metrics::{ProcessUsage, PromText, ServiceMetrics};
use std::rc::Rc;

struct Series {
    prefix: String,
    id: String,
    metrics: Rc<ServiceMetrics>,
    instances: u64,
    queued: u64,
}

impl Series {
    fn labels(&self) -> [(&'static str, &str); 2] {
        [("service", &self.prefix), ("service_id", &self.id)]
    }
}

pub fn render(ctx: &AdminContext) -> String {
    let core = ctx.core.borrow();
    let load = views::load_by_service(&core);
    let mut series: Vec<Series> = ctx
        .supervisor
        .services()
        .iter()
        .map(|s| {
            let (instances, queued) = load.get(&Some(s.id)).copied().unwrap_or_default();
            Series { prefix: s.prefix.to_string(), id: s.id.to_string(), metrics: s.metrics.clone(), instances, queued }
        })
        .collect();
    let (instances, queued) = load.get(&None).copied().unwrap_or_default();
    series.push(Series {
        prefix: "unmanaged".into(),
        id: "unmanaged".into(),
        metrics: core.unmanaged_metrics.clone(),
        instances,
        queued,
    });

    let mut p = PromText::default();
    macro_rules! per_service {
        ($name:expr, $kind:expr, $help:expr, |$s:ident| $value:expr) => {
            p.header($name, $kind, $help);
            for $s in &series {
                p.sample($name, &$s.labels(), $value);
            }
        };
    }
    per_service!(
        "cumulo_requests_received_total",
        "counter",
        "Requests routed to the service's instances (delivered or queued).",
        |s| s.metrics.received.get()
    );
    per_service!("cumulo_requests_sent_total", "counter", "Requests the service's instances sent.", |s| s
        .metrics
        .sent
        .get());
    p.header(
        "cumulo_responses_total",
        "counter",
        "Answers the service's instances returned, by the status they returned.",
    );
    for s in &series {
        p.by_status("cumulo_responses_total", &s.labels(), &s.metrics.responses);
    }
    p.header(
        "cumulo_request_errors_total",
        "counter",
        "Requests routed to the service that the core ended with an error instead of an answer (QUEUE_FULL, TIMEOUT, CRASHED, SHUTTING_DOWN).",
    );
    for s in &series {
        p.by_status("cumulo_request_errors_total", &s.labels(), &s.metrics.errors);
    }
    per_service!("cumulo_request_timeouts_total", "counter", "Requests routed to the service that timed out.", |s| s
        .metrics
        .timeouts());
    per_service!(
        "cumulo_queue_depth",
        "gauge",
        "Requests waiting in the core for one of the service's instances.",
        |s| s.queued
    );
    per_service!("cumulo_instances_up", "gauge", "Instances (connections) of the service connected now.", |s| s
        .instances);
    per_service!(
        "cumulo_process_restarts_total",
        "counter",
        "Processes of the service restarted after they exited.",
        |s| s.metrics.restarts.get()
    );
    p.header(
        "cumulo_request_duration_seconds",
        "histogram",
        "Time from a request's acceptance by the core to its answer reaching the core, for answered requests.",
    );
    for s in &series {
        p.histogram("cumulo_request_duration_seconds", &s.labels(), &s.metrics.duration);
    }

    if let Some(cluster) = &core.cluster {
        super::super::cluster::metrics::render(&mut p, &core, &cluster.borrow());
    }

    core.websockets.render(&mut p);

    let st = &core.stats;
    let mut global = |name: &str, kind: &str, help: &str, v: u64| {
        p.header(name, kind, help);
        p.sample(name, &[], v);
    };
    global(
        "cumulo_slow_consumers_total",
        "counter",
        "Connections closed because they did not read what the core sent them.",
        st.slow_consumers,
    );
    global(
        "cumulo_protocol_errors_total",
        "counter",
        "Connections closed for frames that broke the protocol.",
        st.protocol_errors,
    );
    global(
        "cumulo_no_service_total",
        "counter",
        "Requests refused with NO_SERVICE (no subscriber for the name).",
        st.no_service,
    );
    global(
        "cumulo_late_responses_total",
        "counter",
        "Answers that arrived after their request had timed out.",
        st.late,
    );
    global("cumulo_requests_in_flight", "gauge", "Requests accepted and not yet answered.", core.inflight.len() as u64);
    global(
        "cumulo_connections",
        "gauge",
        "Instances connected (all services, internal and unmanaged included).",
        core.connections() as u64,
    );
    global("cumulo_services", "gauge", "Services the supervisor runs.", ctx.supervisor.services().len() as u64);
    p.header("cumulo_build_info", "gauge", "The core's version.");
    p.sample("cumulo_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1);
    p.header("cumulo_uptime_seconds", "gauge", "Seconds since the core started.");
    p.sample("cumulo_uptime_seconds", &[], ctx.started.elapsed().as_secs_f64());

    if let Some(u) = ProcessUsage::read() {
        p.header("process_cpu_seconds_total", "counter", "User and system CPU time of the core process.");
        p.sample("process_cpu_seconds_total", &[], u.cpu_seconds);
        p.header("process_resident_memory_bytes", "gauge", "Resident memory of the core process.");
        p.sample("process_resident_memory_bytes", &[], u.resident_bytes);
    }
    p.header("process_start_time_seconds", "gauge", "When the core process started, seconds since the Unix epoch.");
    p.sample("process_start_time_seconds", &[], views::unix_seconds(ctx.started_at));
    p.out
}
