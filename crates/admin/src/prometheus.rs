//! `GET /metrics`: the Prometheus text format, per service (labels
//! `service` = prefix and `service_id`; unmanaged instances as
//! `service_id="unmanaged"`), then core-wide and process metrics. With
//! `core.threads` > 1 every figure is the sum over the shards
//! (shards/report.rs), and `cumulo_shard_*` show each shard's share.

use super::{views, AdminContext};
use cumulo_node::shards::report::{Reports, ResilienceTotals};
use cumulo_router::{BreakerState, ProcessUsage, PromText, ServiceCounts};

struct Series {
    prefix: String,
    id: String,
    metrics: ServiceCounts,
    instances: u64,
    queued: u64,
}

impl Series {
    fn labels(&self) -> [(&'static str, &str); 2] {
        [("service", &self.prefix), ("service_id", &self.id)]
    }
}

pub async fn render(ctx: &AdminContext) -> String {
    let reports = views::reports(ctx).await;
    let core = ctx.core.borrow();
    let mut series: Vec<Series> = ctx
        .supervisor
        .services()
        .iter()
        .map(|s| {
            let r = reports.service(Some(s.id));
            let (instances, queued) = (r.instances, r.queued);
            Series { prefix: s.prefix.to_string(), id: s.id.to_string(), metrics: r.counts, instances, queued }
        })
        .collect();
    let r = reports.service(None);
    series.push(Series {
        prefix: "unmanaged".into(),
        id: "unmanaged".into(),
        metrics: r.counts,
        instances: r.instances,
        queued: r.queued,
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
        |s| s.metrics.received
    );
    per_service!("cumulo_requests_sent_total", "counter", "Requests the service's instances sent.", |s| s.metrics.sent);
    p.header(
        "cumulo_responses_total",
        "counter",
        "Answers the service's instances returned, by the status they returned.",
    );
    for s in &series {
        p.by_status_counts("cumulo_responses_total", &s.labels(), &s.metrics.responses);
    }
    p.header(
        "cumulo_request_errors_total",
        "counter",
        "Requests routed to the service that the core ended with an error instead of an answer (QUEUE_FULL, TIMEOUT, CRASHED, SHUTTING_DOWN).",
    );
    for s in &series {
        p.by_status_counts("cumulo_request_errors_total", &s.labels(), &s.metrics.errors);
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
        |s| s.metrics.restarts
    );
    p.header(
        "cumulo_request_duration_seconds",
        "histogram",
        "Time from a request's acceptance by the core to its answer reaching the core, for answered requests.",
    );
    for s in &series {
        p.histogram_counts("cumulo_request_duration_seconds", &s.labels(), &s.metrics.duration);
    }

    if let Some(cluster) = &ctx.cluster {
        cumulo_cluster::render_metrics(&mut p, &core, &cluster.borrow());
    }

    cumulo_gateway::websocket_table().render(&mut p.out);
    render_tls_metrics(&mut p);
    if let Some(tracer) = core.tracer() {
        render_trace_metrics(&mut p, &tracer);
    }

    let st = &reports.stats();
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
        "cumulo_requests_total",
        "counter",
        "Requests the core accepted, each once whatever shards and nodes it crossed here.",
        st.requests,
    );
    global("cumulo_timeouts_total", "counter", "Requests answered TIMEOUT by the core, each once.", st.timeouts);
    global(
        "cumulo_no_service_total",
        "counter",
        "Requests refused with NO_SERVICE (no subscriber for the name).",
        st.no_service,
    );
    global(
        "cumulo_unavailable_total",
        "counter",
        "Requests refused with UNAVAILABLE (their configured service was given up or is stopped).",
        st.unavailable,
    );
    global(
        "cumulo_unauthorized_total",
        "counter",
        "Connections refused at HELLO for their token or the prefix they claimed (docs/SECURITY.md).",
        st.unauthorized,
    );
    global(
        "cumulo_denied_total",
        "counter",
        "Sends refused by the sender's dest_list_allow / dest_list_deny, and subscriptions refused to an instance \
         without a token under a service's prefix.",
        st.denied,
    );
    global(
        "cumulo_late_responses_total",
        "counter",
        "Answers that arrived after their request had timed out.",
        st.late,
    );
    global("cumulo_requests_in_flight", "gauge", "Requests accepted and not yet answered.", reports.in_flight());
    global(
        "cumulo_connections",
        "gauge",
        "Instances connected (all services, internal and unmanaged included).",
        reports.connections(),
    );
    global("cumulo_services", "gauge", "Services the supervisor runs.", ctx.supervisor.services().len() as u64);
    per_shard(&mut p, &reports);
    if let Some(totals) = reports.resilience() {
        resilience(&mut p, &totals);
    }
    p.header("cumulo_build_info", "gauge", "The core's version.");
    p.sample("cumulo_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1);
    p.header("cumulo_uptime_seconds", "gauge", "Seconds since the core started.");
    p.sample("cumulo_uptime_seconds", &[], ctx.started.elapsed().as_secs_f64());
    p.header("cumulo_admin_auth_failures_total", "counter", "Admin API calls refused 401: no token, or a wrong one.");
    p.sample("cumulo_admin_auth_failures_total", &[], ctx.auth.failures());
    p.header(
        "cumulo_admin_auth_throttled_total",
        "counter",
        "Admin API calls refused 429, their address having failed to authenticate too often.",
    );
    p.sample("cumulo_admin_auth_throttled_total", &[], ctx.auth.refused());

    if let Some(u) = ProcessUsage::read() {
        p.header("process_cpu_seconds_total", "counter", "User and system CPU time of the core process.");
        p.sample("process_cpu_seconds_total", &[], u.cpu_seconds);
        p.header("process_resident_memory_bytes", "gauge", "Resident memory of the core process.");
        p.sample("process_resident_memory_bytes", &[], u.resident_bytes);
    }
    services_own(&mut p, core.reports());
    p.header("process_start_time_seconds", "gauge", "When the core process started, seconds since the Unix epoch.");
    p.sample("process_start_time_seconds", &[], views::unix_seconds(ctx.started_at));
    p.out
}

/// Each shard's share (`core.threads`), and whether it answered in time.
fn per_shard(p: &mut PromText, reports: &Reports) {
    let mut each =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(&cumulo_node::shards::report::ShardReport) -> u64| {
            p.header(name, kind, help);
            for r in &reports.shards {
                p.sample(name, &[("shard", &r.shard.to_string())], value(r));
            }
        };
    each("cumulo_shard_requests_total", "counter", "Requests that entered the core on the shard.", &|r| {
        r.stats.requests
    });
    each("cumulo_shard_responses_total", "counter", "Answers the shard's instances returned.", &|r| r.stats.responses);
    each("cumulo_shard_requests_in_flight", "gauge", "Requests the shard sent and has not had answered yet.", &|r| {
        r.in_flight
    });
    each("cumulo_shard_connections", "gauge", "Instances connected to the shard.", &|r| r.connections);
    p.header(
        "cumulo_shard_up",
        "gauge",
        "1 if the shard answered the report in time, 0 if not (its figures are then missing from every sum).",
    );
    let mut up: Vec<(u32, u8)> = reports.shards.iter().map(|r| (r.shard, 1)).collect();
    up.extend(reports.missing.iter().map(|s| (*s, 0)));
    up.sort();
    for (shard, v) in up {
        p.sample("cumulo_shard_up", &[("shard", &shard.to_string())], v);
    }
}

/// The policies' counters, each breaker's state (the worst over the
/// shards) and the instances ejected now; only when policies exist.
fn resilience(p: &mut PromText, t: &ResilienceTotals) {
    let s = &t.stats;
    let mut global = |name: &str, kind: &str, help: &str, v: u64| {
        p.header(name, kind, help);
        p.sample(name, &[], v);
    };
    global("cumulo_retries_total", "counter", "Retries sent under a policy's retry.", s.retries);
    global("cumulo_retries_recovered_total", "counter", "Requests answered OK after at least one retry.", s.recovered);
    global(
        "cumulo_retries_gave_up_total",
        "counter",
        "Requests whose last attempt failed with retries unused (the deadline left no room, or the status is not retried).",
        s.gave_up,
    );
    global(
        "cumulo_breaker_refused_total",
        "counter",
        "Requests refused UNAVAILABLE at once by an open circuit breaker.",
        s.refused,
    );
    global("cumulo_breaker_trips_total", "counter", "Circuit breakers that opened.", s.trips);
    global("cumulo_outlier_ejections_total", "counter", "Instances taken out of selection as outliers.", s.ejections);
    global("cumulo_ejected_instances", "gauge", "Instances out of selection now, as outliers.", t.ejected.len() as u64);
    p.header(
        "cumulo_breaker_state",
        "gauge",
        "A circuit breaker's state: 0 closed, 1 open, 2 half_open (the worst over the shards, open the worst).",
    );
    for ((policy, pattern), state) in worst_states(t) {
        p.sample("cumulo_breaker_state", &[("policy", policy), ("pattern", pattern)], state);
    }
}

/// Per (policy, pattern), the worst state any shard's breaker is in, as
/// the metric encodes it.
fn worst_states(t: &ResilienceTotals) -> std::collections::BTreeMap<(&str, &str), u8> {
    let code = |s: BreakerState| match s {
        BreakerState::Closed => 0,
        BreakerState::Open => 1,
        BreakerState::HalfOpen => 2,
    };
    // Open refuses everything; half-open lets probes through.
    let rank = |c: u8| [0, 2, 1][c as usize];
    let mut worst = std::collections::BTreeMap::new();
    for (_, b) in &t.breakers {
        let c = code(b.state);
        let w = worst.entry((b.policy.as_str(), b.pattern.as_str())).or_insert(c);
        if rank(c) > rank(*w) {
            *w = c;
        }
    }
    worst
}

/// The samples of services built on the core (`cumulo_queue_*`), each
/// name's header once.
fn services_own(p: &mut PromText, reports: &cumulo_service::Reports) {
    let mut samples = Vec::new();
    for r in reports.all() {
        r.metrics(&mut samples);
    }
    samples.sort_by_key(|m| m.name);
    let mut last = "";
    for m in &samples {
        let name = format!("cumulo_{}", m.name);
        if m.name != last {
            let kind = match m.kind {
                cumulo_service::MetricKind::Counter => "counter",
                cumulo_service::MetricKind::Gauge => "gauge",
            };
            p.header(&name, kind, m.help);
            last = m.name;
        }
        let labels: Vec<(&str, &str)> = m.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        p.sample(&name, &labels, m.value);
    }
}

/// The span exporter's series (`[tracing]` on): what was recorded, sent,
/// refused by the collector, and dropped for want of room.
fn render_trace_metrics(p: &mut cumulo_router::PromText, tracer: &cumulo_service::trace::Recorder) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = tracer.counters();
    for (name, help, v) in [
        ("cumulo_trace_spans_recorded_total", "Spans the core recorded (sampled requests).", &c.recorded),
        ("cumulo_trace_spans_exported_total", "Spans the collector accepted.", &c.exported),
        (
            "cumulo_trace_spans_failed_total",
            "Spans in export requests that failed (collector unreachable, refused or past the export timeout).",
            &c.failed,
        ),
        (
            "cumulo_trace_spans_dropped_total",
            "Spans dropped because the exporter's queue was full (tracing.max_queue_spans / max_queue_bytes).",
            &c.dropped,
        ),
    ] {
        p.header(name, "counter", help);
        p.sample(name, &[], v.load(Relaxed));
    }
}

/// The HTTP gateways' TLS series of `GET /metrics` (handshake failures).
fn render_tls_metrics(p: &mut cumulo_router::PromText) {
    use cumulo_tls::{handshake_failures, Listener};
    let name = "cumulo_http_tls_handshake_failures_total";
    p.header(
        name,
        "counter",
        "TLS handshakes the HTTP gateways did not complete (not TLS, refused by either side, or past header_timeout_ms).",
    );
    p.sample(name, &[], handshake_failures(Listener::Http));
    let name = "cumulo_tcp_tls_handshake_failures_total";
    p.header(
        name,
        "counter",
        "TLS handshakes the TCP listener for instances did not complete (not TLS, no or an unknown client certificate, or past core.hello_timeout).",
    );
    p.sample(name, &[], handshake_failures(Listener::Tcp));
}
