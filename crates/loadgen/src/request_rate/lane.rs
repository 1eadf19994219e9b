//! One request_rate instance sending its share of the schedule with
//! send_async, and collecting the answers with recv_async.

use crate::answer::{judge, RequestSpec};
use crate::recorder::SharedRecorder;
use crate::schedule::{latency_origin, Due, Pacer};
use ahash::AHashMap;
use cumulo_service::{SendOptions, ServiceApi, TransId};
use std::cell::RefCell;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub async fn run<A: ServiceApi>(
    api: &A,
    spec: &RequestSpec,
    mut pacer: Pacer,
    rec: &SharedRecorder,
    inflight_max: usize,
) {
    let inflight: RefCell<AHashMap<TransId, Instant>> = RefCell::new(AHashMap::new());
    let freed = Notify::new();
    let options = SendOptions { timeout_ms: spec.timeout_ms, ..Default::default() };
    let timeout = Duration::from_millis(spec.timeout_ms as u64);

    let send = async {
        'next: loop {
            let due = match pacer.next().await {
                Due::Stop => return,
                Due::At(t) => Some(t),
                Due::Now => None,
            };
            while inflight.borrow().len() >= pacer.inflight_cap(inflight_max) {
                let give_up = due.unwrap_or_else(Instant::now) + timeout;
                tokio::select! {
                    _ = freed.notified() => {}
                    _ = tokio::time::sleep_until(give_up.into()) => {
                        if due.is_some() && inflight.borrow().len() >= pacer.inflight_cap(inflight_max) {
                            rec.lock().dropped();
                            continue 'next;
                        }
                    }
                }
            }
            let now = Instant::now();
            let origin = due.map_or(now, |d| latency_origin(d, now));
            rec.lock().sent();
            // An immediate error (NO_SERVICE, QUEUE_FULL) is answered inside
            // send_async and found by the receiving loop like any answer.
            let tid = api.send_async(&spec.name, &spec.request_info, &spec.request, options);
            inflight.borrow_mut().insert(tid, origin);
        }
    };
    let receive = async {
        loop {
            let r = api.recv_async(None).await;
            let Some(origin) = inflight.borrow_mut().remove(&r.trans_id) else { continue };
            let outcome = judge(r.status, &r.response, spec.check.as_deref());
            rec.lock().done(origin.elapsed().as_micros() as u64, &outcome);
            freed.notify_one();
        }
    };
    // The receiving loop never ends by itself: it goes when the instance does.
    tokio::join!(send, receive);
}
