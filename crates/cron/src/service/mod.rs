//! The running service: one task per job that sleeps until the job's next
//! event and sends its request, and the answers to `<prefix>jobs.json/get`.

use crate::report::{CronReport, JobCounters};
use crate::settings::{Job, Settings};
use crate::zone::next_after;
use cumulo_service::{info, trace, Response, SendOptions, ServiceApi, Status};
use jiff::{SignedDuration, Timestamp};
use std::rc::Rc;
use std::time::Duration;

#[cfg(test)]
mod tests;

/// The longest single sleep: the wall clock is read again at least this
/// often, so a clock set forward or back is noticed within it.
const MAX_SLEEP: Duration = Duration::from_secs(10);
/// The most missed events counted one by one after a stall; past it the
/// job starts again from now and counts this many.
const MAX_MISSED_COUNTED: u64 = 10_000;

/// Aborts the job tasks when the instance stops (or its future is dropped).
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

pub async fn run<A: ServiceApi + 'static>(settings: Settings, api: A) {
    let api = Rc::new(api);
    let settings = Rc::new(settings);
    let counters: Rc<[JobCounters]> = settings.jobs.iter().map(|_| JobCounters::default()).collect();
    let report =
        Rc::new(CronReport { prefix: api.prefix().to_string(), settings: settings.clone(), jobs: counters.clone() });
    api.report(report.clone());
    if api.thread_count() > 1 {
        tracing::warn!(
            "cron {}: count_thread = {}: every thread of a process fires its jobs; use count_thread = 1",
            api.prefix(),
            api.thread_count()
        );
    }
    // Jobs are spread over the processes, as CloudI's cron does.
    let (index, count) = (api.process_index() as usize, api.process_count().max(1) as usize);
    let mut tasks = Tasks(Vec::new());
    for i in (0..settings.jobs.len()).filter(|i| i % count == index) {
        counters[i].here.set(true);
        tasks.0.push(tokio::task::spawn_local(job_loop(api.clone(), settings.clone(), counters.clone(), i)));
    }
    tracing::info!("cron {}: {} jobs, time zone {}", api.prefix(), tasks.0.len(), settings.timezone_name);
    if let Err(e) = api.subscribe("jobs.json/get") {
        tracing::error!("cron {}: cannot subscribe 'jobs.json/get': {}", api.prefix(), e.why());
    }
    while let Some(req) = api.next_request().await {
        let body = serde_json::to_vec_pretty(&report.jobs_json()).unwrap_or_default();
        api.return_(&req, Status::Ok, &info::encode(&[("content-type", "application/json")]), &body);
    }
    drop(tasks);
}

async fn job_loop<A: ServiceApi + 'static>(api: Rc<A>, settings: Rc<Settings>, counters: Rc<[JobCounters]>, i: usize) {
    let (job, c, zone) = (&settings.jobs[i], &counters[i], &settings.timezone);
    let mut next = next_after(&job.schedule, Timestamp::now(), zone);
    while let Some(at) = next {
        c.next.set(Some(at));
        sleep_until(at).await;
        let now = Timestamp::now();
        // Events whose time passed while this one waited (a stall, a
        // suspended machine, the clock set forward) are skipped, counted.
        let mut following = next_after(&job.schedule, at, zone);
        let mut missed = 0;
        while let Some(f) = following.filter(|f| *f <= now) {
            missed += 1;
            following = if missed < MAX_MISSED_COUNTED {
                next_after(&job.schedule, f, zone)
            } else {
                next_after(&job.schedule, now, zone)
            };
        }
        if missed > 0 {
            c.missed.set(c.missed.get() + missed);
            tracing::warn!("cron {}: job {}: {missed} events missed before {now}", api.prefix(), job.name);
        }
        fire(&api, &settings, &counters, i, at, following, now);
        next = following;
    }
    c.next.set(None);
    tracing::info!("cron {}: job {} has no more events", api.prefix(), job.name);
}

/// Sleeps until the wall clock reads `at`, reading it again at least every
/// [`MAX_SLEEP`].
async fn sleep_until(at: Timestamp) {
    loop {
        let left = at.duration_since(Timestamp::now());
        if !left.is_positive() {
            return;
        }
        let left = Duration::try_from(left).unwrap_or(MAX_SLEEP);
        tokio::time::sleep(left.min(MAX_SLEEP)).await;
    }
}

fn millis(d: SignedDuration) -> u64 {
    d.as_millis().clamp(0, i128::from(u64::MAX)) as u64
}

/// Sends the request of event `at` of job `i`; its answer is counted when
/// it comes.
fn fire<A: ServiceApi + 'static>(
    api: &Rc<A>,
    settings: &Settings,
    counters: &Rc<[JobCounters]>,
    i: usize,
    at: Timestamp,
    following: Option<Timestamp>,
    now: Timestamp,
) {
    let (job, c) = (&settings.jobs[i], &counters[i]);
    let late = millis(now.duration_since(at));
    c.fired.set(c.fired.get() + 1);
    c.last.set(Some(at));
    c.late_ms_last.set(late);
    c.late_ms_max.set(c.late_ms_max.get().max(late));
    c.late_ms_sum.set(c.late_ms_sum.get().saturating_add(late));
    let mut request_info = job.request_info.clone();
    add_event_info(&mut request_info, job, at, following);
    if let Some(tracer) = api.tracer() {
        start_trace(&tracer, &mut request_info, job);
    }
    let timeout_ms = match (job.timeout_ms, following) {
        (0, Some(f)) => millis(f.duration_since(now)).clamp(1, u64::from(u32::MAX)) as u32,
        (t, _) => t,
    };
    let o = SendOptions { timeout_ms, priority: job.priority, wait_for_service: false };
    let prefix = api.prefix().to_string();
    let name = job.name.clone();
    let counters = counters.clone();
    let outcome = move |r: &Response| {
        counters[i].answered(r.status);
        if r.status != Status::Ok {
            let why = String::from_utf8_lossy(&r.response);
            tracing::warn!("cron {prefix}: job {name}: event {at}: {:?}: {why}", r.status);
        }
    };
    if job.mcast {
        let ids = api.mcast_async(&job.dest, &request_info, &job.request, o);
        if ids.is_empty() {
            c.failed.set(c.failed.get() + 1);
            tracing::warn!("cron {}: job {}: event {at}: no service subscribes {}", api.prefix(), job.name, job.dest);
            return;
        }
        let api = api.clone();
        tokio::task::spawn_local(async move {
            for id in ids {
                outcome(&api.recv_async(Some(id)).await);
            }
        });
        return;
    }
    let dest = match &settings.via {
        None => job.dest.clone(),
        Some(via) => {
            // The same key on every node: the queue stores the event once.
            let key = format!("{}{}:{}", api.prefix(), job.name, at.as_second());
            info::push(&mut request_info, b"idempotency-key", key.as_bytes());
            format!("{via}{}", &job.dest[1..])
        }
    };
    let answer = api.call(&dest, &request_info, &job.request, o);
    tokio::task::spawn_local(async move { outcome(&answer.await) });
}

/// With `[tracing]` on, each firing is a trace of its own (docs/TRACING.md):
/// an INTERNAL span `cron <job>`, recorded when the trace is sampled, is
/// the parent of the request's. A job whose request_info names a
/// `traceparent` keeps it.
fn start_trace(tracer: &trace::Recorder, request_info: &mut Vec<u8>, job: &Job) {
    if trace::find(request_info).is_some() {
        return;
    }
    let root = trace::TraceParent::root(true);
    let root = trace::TraceParent { flags: tracer.sampler().root(&root.trace_id) as u8, ..root };
    info::push(request_info, b"traceparent", &root.encode());
    if root.sampled() {
        let now = std::time::SystemTime::now();
        tracer.record(trace::Span {
            trace_id: root.trace_id,
            span_id: root.span_id,
            parent_id: [0; 8],
            parent_remote: false,
            flags: root.flags,
            kind: trace::SpanKind::Internal,
            name: format!("cron {}", job.name),
            start: now,
            end: now,
            status: trace::SpanStatus::Unset,
            attrs: vec![("cumulo.cron.job", trace::AttrValue::Str(job.name.clone().into()))],
            links: vec![],
        });
    }
}

/// The request_info keys that say which event this is (proto/PROTOCOL.md).
fn add_event_info(out: &mut Vec<u8>, job: &Job, at: Timestamp, following: Option<Timestamp>) {
    info::push(out, b"cron-job", job.name.as_bytes());
    info::push(out, b"cron-time", at.to_string().as_bytes());
    info::push(out, b"cron-unix", at.as_second().to_string().as_bytes());
    if let Some(f) = following {
        info::push(out, b"cron-next", f.to_string().as_bytes());
    }
}
