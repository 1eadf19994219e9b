//! Deliveries: each stored request is sent to its destination with its own
//! timeout; a failure the settings retry is tried again after a delay, up
//! to `max_deliveries` attempts and never past the request's deadline;
//! then it becomes a dead letter.

use crate::record::{Failure, Stored};
use crate::service::{id_info, status_name, Shared};
use crate::settings::Settings;
use crate::store::now_ms;
use cumulo_service::{info, Response, SendOptions, ServiceApi, Status};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinSet;

/// An attempt's timeout when neither the settings nor the request give one.
const DEFAULT_TIMEOUT_MS: u32 = 5000;

/// Starts attempts while there is room, and sleeps until something
/// arrives, an attempt ends, or a delayed request is due.
pub(crate) async fn deliver<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, tasks: &RefCell<JoinSet<()>>) {
    loop {
        let due = {
            let mut store = shared.store.borrow_mut();
            let due = store.promote_due(now_ms());
            let mut tasks = tasks.borrow_mut();
            while tasks.try_join_next().is_some() {}
            while let Some(s) = store.start_next(shared.settings.max_in_flight) {
                tasks.spawn_local(attempt(shared.clone(), s));
            }
            due
        };
        match due {
            Some(at) => {
                let wait = Duration::from_millis(at.saturating_sub(now_ms()));
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
            None => shared.wake.notified().await,
        }
    }
}

/// One attempt of one request.
async fn attempt<A: ServiceApi + 'static>(shared: Rc<Shared<A>>, s: Stored) {
    let now = now_ms();
    if s.expires_ms != 0 && now >= s.expires_ms {
        shared.store.borrow_mut().counters.expired += 1;
        let answer = failed_answer(&s, Status::Timeout, "its deadline (expires_ms) passed before it was delivered");
        return dead(&shared, &s, None, answer);
    }
    let timeout = attempt_timeout(s.timeout_ms, s.expires_ms, now);
    let ri = delivery_info(&s.request_info, s.id, s.attempts);
    let o = SendOptions { timeout_ms: timeout, priority: s.priority, wait_for_service: false };
    let answer = shared.api.call(&s.destination, &ri, &s.request, o).await;
    ended(&shared, s, answer);
    shared.wake.notify_one();
}

/// What an attempt's answer does to its request.
fn ended<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, s: Stored, answer: Response) {
    let now = now_ms();
    let failure = Failure { attempt: s.attempts, at_ms: now, status: answer.status.code() };
    match verdict(&shared.settings, answer.status, s.attempts, s.expires_ms, now) {
        Verdict::Finished => {
            {
                let mut store = shared.store.borrow_mut();
                if answer.status == Status::Ok {
                    store.counters.delivered += 1;
                } else {
                    store.counters.answered_error += 1;
                }
                store.finish(s.id);
            }
            answered(shared, &s, answer)
        }
        Verdict::Retry { due_ms } => shared.store.borrow_mut().retry_at(s.id, failure, due_ms),
        Verdict::Dead { expired } => {
            shared.store.borrow_mut().counters.expired += expired as u64;
            dead(shared, &s, Some(failure), answer)
        }
    }
}

/// What becomes of a request after an attempt, whatever keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Answered: `OK`, or a status that is not retried.
    Finished,
    /// Tried again at this time (Unix ms).
    Retry { due_ms: u64 },
    /// Out of attempts, or (`expired`) the next one would start past the
    /// request's deadline.
    Dead { expired: bool },
}

/// The verdict on attempt `attempts` (1 for the first) of a request whose
/// deadline is `expires_ms` (0: none), answered with `status` at `now_ms`.
pub fn verdict(s: &Settings, status: Status, attempts: u32, expires_ms: u64, now_ms: u64) -> Verdict {
    if status == Status::Ok || !s.retries(status) {
        return Verdict::Finished;
    }
    if attempts >= s.max_deliveries {
        return Verdict::Dead { expired: false };
    }
    let due_ms = now_ms + crate::backoff::delay(s, attempts).as_millis() as u64;
    if expires_ms != 0 && due_ms >= expires_ms {
        return Verdict::Dead { expired: true };
    }
    Verdict::Retry { due_ms }
}

/// An attempt's timeout: the request's own (or 5 s when it has none),
/// never reaching past its deadline.
pub fn attempt_timeout(timeout_ms: u32, expires_ms: u64, now_ms: u64) -> u32 {
    let timeout = if timeout_ms > 0 { timeout_ms } else { DEFAULT_TIMEOUT_MS };
    if expires_ms == 0 {
        return timeout;
    }
    timeout.min(expires_ms.saturating_sub(now_ms).min(u32::MAX as u64) as u32).max(1)
}

/// The request_info of a delivery: the request's own, then `queue-id` and
/// `queue-attempt`.
pub fn delivery_info(request_info: &[u8], id: u64, attempt: u32) -> Vec<u8> {
    let mut ri = Vec::with_capacity(request_info.len() + 40);
    ri.extend_from_slice(request_info);
    info::push(&mut ri, b"queue-id", id.to_string().as_bytes());
    info::push(&mut ri, b"queue-attempt", attempt.to_string().as_bytes());
    ri
}

/// Sends the destination's answer of request `id` to its `reply_to`, once
/// (not stored: a `reply_to` that must not miss one is itself a queue);
/// one that is not taken is logged.
pub fn send_reply<A: ServiceApi>(
    api: &A,
    id: u64,
    destination: &str,
    reply_to: &str,
    answer: &Response,
    timeout_ms: u32,
    priority: i8,
) {
    let ri = reply_info(id, answer.status, destination);
    let timeout_ms = if timeout_ms > 0 { timeout_ms } else { DEFAULT_TIMEOUT_MS };
    let o = SendOptions { timeout_ms, priority, wait_for_service: false };
    let call = api.call(reply_to, &ri, &answer.response, o);
    let (prefix, to) = (api.prefix().to_string(), reply_to.to_string());
    tokio::task::spawn_local(async move {
        let r = call.await;
        if r.status != Status::Ok {
            tracing::warn!("queue {prefix}: the answer of request {id} was not taken by reply_to {to}: {}", r.status);
        }
    });
}

/// The request_info of the answer sent to `reply_to`.
pub fn reply_info(id: u64, status: Status, destination: &str) -> Vec<u8> {
    let mut ri = id_info(id);
    info::push(&mut ri, b"queue-status", status.name().as_bytes());
    info::push(&mut ri, b"queue-destination", destination.as_bytes());
    ri
}

/// The request_info of a dead letter sent to `dead_letter`.
pub fn dead_letter_info(request_info: &[u8], id: u64, destination: &str, attempts: u32, history: &str) -> Vec<u8> {
    let mut ri = request_info.to_vec();
    info::push(&mut ri, b"queue-id", id.to_string().as_bytes());
    info::push(&mut ri, b"queue-destination", destination.as_bytes());
    info::push(&mut ri, b"queue-attempts", attempts.to_string().as_bytes());
    info::push(&mut ri, b"queue-history", history.as_bytes());
    ri
}

/// The request is finished: its waiting senders get the answer, and its
/// `reply_to`, if any, gets it as a request.
fn answered<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, s: &Stored, answer: Response) {
    if let Some(waiting) = shared.waiters.borrow_mut().remove(&s.id) {
        let mut ri = answer.response_info.clone();
        info::push(&mut ri, b"queue-id", s.id.to_string().as_bytes());
        for req in waiting {
            shared.api.return_(&req, answer.status, &ri, &answer.response);
        }
    }
    if !s.reply_to.is_empty() {
        send_reply(&shared.api, s.id, &s.destination, &s.reply_to, &answer, s.timeout_ms, s.priority);
    }
}

/// An answer made by the queue for a request it gives up on.
fn failed_answer(s: &Stored, status: Status, why: &str) -> Response {
    Response {
        trans_id: Default::default(),
        status,
        response_info: vec![],
        response: format!("queue: request {} to {}: {why}", s.id, s.destination).into_bytes(),
    }
}

/// `1:TIMEOUT@1700000000000,2:CRASHED@...`: what each failed attempt met.
fn history_text(s: &Stored, last: Option<Failure>) -> String {
    history(s.history.iter().chain(last.as_ref()))
}

/// `1:TIMEOUT@1700000000000,2:CRASHED@...` of these failed attempts.
pub fn history<'a>(failures: impl Iterator<Item = &'a Failure>) -> String {
    failures.map(|f| format!("{}:{}@{}", f.attempt, status_name(f.status), f.at_ms)).collect::<Vec<_>>().join(",")
}

/// Out of attempts or time: a dead letter, kept for replay (up to
/// `max_dead_letters`) and sent to `dead_letter` if set.
fn dead<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, s: &Stored, last: Option<Failure>, answer: Response) {
    let history = history_text(s, last);
    let settings = &shared.settings;
    let prefix = shared.api.prefix().to_string();
    let dropped = shared.store.borrow_mut().make_dead(s.id, last, settings.max_dead_letters);
    tracing::warn!(
        "queue {prefix}: request {} to {} is a dead letter after {} attempts ({history}){}",
        s.id,
        s.destination,
        s.attempts,
        if dropped.contains(&s.id) { "; dropped: max_dead_letters is 0" } else { "" }
    );
    if dropped.iter().any(|d| *d != s.id) {
        tracing::warn!("queue {prefix}: dropped {} older dead letters (max_dead_letters)", dropped.len());
    }
    answered(shared, s, answer);
    let Some(to) = settings.dead_letter.clone() else { return };
    let ri = dead_letter_info(&s.request_info, s.id, &s.destination, s.attempts, &history);
    let timeout = if s.timeout_ms > 0 { s.timeout_ms } else { DEFAULT_TIMEOUT_MS };
    let o = SendOptions { timeout_ms: timeout, priority: s.priority, wait_for_service: false };
    let call = shared.api.call(&to, &ri, &s.request, o);
    // Weak: a queue that stops closes its log at once, whatever is in flight.
    let (shared, id) = (Rc::downgrade(shared), s.id);
    tokio::task::spawn_local(async move {
        let r = call.await;
        let Some(shared) = shared.upgrade() else { return };
        if r.status == Status::Ok {
            // Handed over: the dead_letter service has it now.
            let mut store = shared.store.borrow_mut();
            if store.get(id).is_some() {
                store.finish(id);
            }
        } else {
            tracing::warn!("queue {prefix}: dead letter {id} not taken by {to} ({}): kept here for replay", r.status);
        }
    });
}
