//! Deliveries: each stored request is sent to its destination with its own
//! timeout; a failure the settings retry is tried again after a delay, up
//! to `max_deliveries` attempts and never past the request's deadline;
//! then it becomes a dead letter.

use crate::record::{Failure, Stored};
use crate::service::{id_info, status_name, Shared};
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
    let mut timeout = if s.timeout_ms > 0 { s.timeout_ms } else { DEFAULT_TIMEOUT_MS };
    if s.expires_ms != 0 {
        timeout = timeout.min((s.expires_ms - now).min(u32::MAX as u64) as u32).max(1);
    }
    let mut ri = s.request_info.clone();
    info::push(&mut ri, b"queue-id", s.id.to_string().as_bytes());
    info::push(&mut ri, b"queue-attempt", s.attempts.to_string().as_bytes());
    let o = SendOptions { timeout_ms: timeout, priority: s.priority, wait_for_service: false };
    let answer = shared.api.call(&s.destination, &ri, &s.request, o).await;
    ended(&shared, s, answer);
    shared.wake.notify_one();
}

/// What an attempt's answer does to its request.
fn ended<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, s: Stored, answer: Response) {
    let settings = &shared.settings;
    if answer.status == Status::Ok || !settings.retries(answer.status) {
        {
            let mut store = shared.store.borrow_mut();
            if answer.status == Status::Ok {
                store.counters.delivered += 1;
            } else {
                store.counters.answered_error += 1;
            }
            store.finish(s.id);
        }
        return answered(shared, &s, answer);
    }
    let now = now_ms();
    let failure = Failure { attempt: s.attempts, at_ms: now, status: answer.status.code() };
    if s.attempts >= settings.max_deliveries {
        return dead(shared, &s, Some(failure), answer);
    }
    let due = now + crate::backoff::delay(settings, s.attempts).as_millis() as u64;
    if s.expires_ms != 0 && due >= s.expires_ms {
        shared.store.borrow_mut().counters.expired += 1;
        return dead(shared, &s, Some(failure), answer);
    }
    shared.store.borrow_mut().retry_at(s.id, failure, due);
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
        let mut ri = id_info(s.id);
        info::push(&mut ri, b"queue-status", answer.status.name().as_bytes());
        info::push(&mut ri, b"queue-destination", s.destination.as_bytes());
        let o = SendOptions { timeout_ms: s.timeout_ms.max(1), priority: s.priority, wait_for_service: false };
        let call = shared.api.call(&s.reply_to, &ri, &answer.response, o);
        let (prefix, to, id) = (shared.api.prefix().to_string(), s.reply_to.clone(), s.id);
        tokio::task::spawn_local(async move {
            let r = call.await;
            if r.status != Status::Ok {
                tracing::warn!(
                    "queue {prefix}: the answer of request {id} was not taken by reply_to {to}: {}",
                    r.status
                );
            }
        });
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
    s.history
        .iter()
        .chain(last.as_ref())
        .map(|f| format!("{}:{}@{}", f.attempt, status_name(f.status), f.at_ms))
        .collect::<Vec<_>>()
        .join(",")
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
    let mut ri = s.request_info.clone();
    info::push(&mut ri, b"queue-id", s.id.to_string().as_bytes());
    info::push(&mut ri, b"queue-destination", s.destination.as_bytes());
    info::push(&mut ri, b"queue-attempts", s.attempts.to_string().as_bytes());
    info::push(&mut ri, b"queue-history", history.as_bytes());
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
