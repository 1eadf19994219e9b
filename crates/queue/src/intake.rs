//! A request arrives at the queue: it is checked, deduplicated, written to
//! the log, and acknowledged (or, in `destination` mode, held until the
//! destination answers).

use crate::record::Stored;
use crate::service::{id_info, refuse, Shared};
use crate::settings::{Mode, Settings};
use crate::store::now_ms;
use cumulo_service::{info, Request, ServiceApi, ServiceError, Status};
use cumulo_wal::WalError;
use std::rc::Rc;

/// request_info keys the queue reads.
const IDEMPOTENCY_KEY: &[u8] = b"idempotency-key";
const REPLY_TO: &[u8] = b"reply_to";
/// A request's own deadline, in ms from its arrival (at most the queue's
/// `expires_ms` when that is set).
const EXPIRES_MS: &[u8] = b"expires-ms";
/// Longest idempotency key and reply_to name kept.
const MAX_KEY: usize = 1024;

pub(crate) async fn take<A: ServiceApi + 'static>(shared: Rc<Shared<A>>, req: A::Request) {
    let stored = match check(&shared, &req) {
        Ok(Checked::Store(s)) => s,
        Ok(Checked::Duplicate(first)) => return duplicate(&shared, req, first),
        Err(e) => return refuse(&shared.api, &req, e),
    };
    let id = stored.id;
    let written = shared.store.borrow().append_put(&stored);
    match written.await {
        Ok(pos) => {
            shared.store.borrow_mut().insert(stored, pos, &shared.settings);
            match shared.settings.mode {
                Mode::Accepted => shared.api.return_(&req, Status::Ok, &id_info(id), id.to_string().as_bytes()),
                Mode::Destination => shared.waiters.borrow_mut().entry(id).or_default().push(req),
            }
            shared.wake.notify_one();
        }
        Err(e) => {
            shared.store.borrow_mut().counters.refused_full += matches!(e, WalError::Full { .. }) as u64;
            refuse(&shared.api, &req, log_error(shared.api.prefix(), &e));
        }
    }
}

/// The error a sender sees when the log refused its request.
fn log_error(prefix: &str, e: &WalError) -> ServiceError {
    match e {
        WalError::Full { used, limit, .. } => ServiceError::new(
            Status::QueueFull,
            format!("queue {prefix} is full: max_bytes ({limit} bytes) reached ({used} on disk)"),
        ),
        WalError::Io { source, .. } if source.raw_os_error() == Some(28) => ServiceError::new(
            Status::QueueFull,
            format!("queue {prefix} is full: the disk of its log is full ({e}); nothing was stored"),
        ),
        other => ServiceError::new(Status::ServiceError, format!("queue {prefix}: cannot store the request: {other}")),
    }
}

enum Checked {
    Store(Stored),
    /// The same idempotency key came within the window: the first one's id.
    Duplicate(u64),
}

/// A duplicate is not stored again. In `destination` mode its sender waits
/// for the first copy's answer while that copy is held; otherwise it is
/// acknowledged at once with the first copy's id.
fn duplicate<A: ServiceApi>(shared: &Shared<A>, req: A::Request, first: u64) {
    if shared.settings.mode == Mode::Destination {
        if let Some(w) = shared.waiters.borrow_mut().get_mut(&first) {
            w.push(req);
            return;
        }
    }
    let mut info = id_info(first);
    info::push(&mut info, b"queue-duplicate", b"1");
    shared.api.return_(&req, Status::Ok, &info, first.to_string().as_bytes());
}

/// A request checked and read: what any backend stores of it besides its
/// request_info and body.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub destination: String,
    pub reply_to: String,
    pub idempotency_key: String,
    pub arrived_ms: u64,
    /// Its deadline (Unix ms), 0 for none.
    pub expires_ms: u64,
    /// Each attempt's timeout.
    pub timeout_ms: u32,
    pub priority: i8,
}

/// Checks a request sent to a queue and reads what the queue needs of it:
/// its destination (the name after the prefix, never under the prefix
/// itself), `idempotency-key`, `reply_to`, deadline and timeout.
pub fn prepare<A: ServiceApi>(api: &A, s: &Settings, req: &A::Request) -> Result<Prepared, ServiceError> {
    let prefix = api.prefix();
    let rest = req.name().strip_prefix(prefix).unwrap_or("");
    if rest.is_empty() {
        return Err(ServiceError::new(
            Status::InvalidArgument,
            format!("queue {prefix}: no destination: send to {prefix}<name> to have <name> delivered to /<name>"),
        ));
    }
    let destination = format!("/{rest}");
    if destination.starts_with(prefix) {
        return Err(ServiceError::new(
            Status::InvalidArgument,
            format!("queue {prefix}: {destination} is this queue itself: a queue cannot deliver to itself"),
        ));
    }
    let ri = req.request_info();
    let text = |key: &[u8]| -> Result<String, ServiceError> {
        let v = info::get(ri, key).unwrap_or(b"");
        if v.len() > MAX_KEY {
            return Err(ServiceError::new(
                Status::InvalidArgument,
                format!("queue {prefix}: request_info {} is over {MAX_KEY} bytes", String::from_utf8_lossy(key)),
            ));
        }
        String::from_utf8(v.to_vec()).map_err(|_| {
            ServiceError::new(
                Status::InvalidArgument,
                format!("queue {prefix}: request_info {} is not UTF-8", String::from_utf8_lossy(key)),
            )
        })
    };
    let idempotency_key = text(IDEMPOTENCY_KEY)?;
    let reply_to = text(REPLY_TO)?;
    if !reply_to.is_empty() && !reply_to.starts_with('/') {
        return Err(ServiceError::new(
            Status::InvalidArgument,
            format!("queue {prefix}: reply_to '{reply_to}' must be a service name starting with '/'"),
        ));
    }
    let now = now_ms();
    let mut expires_ms = if s.expires.is_zero() { 0 } else { now + s.expires.as_millis() as u64 };
    if let Some(v) = info::get(ri, EXPIRES_MS) {
        let ms: u64 = std::str::from_utf8(v).ok().and_then(|t| t.parse().ok()).ok_or_else(|| {
            ServiceError::new(Status::InvalidArgument, format!("queue {prefix}: request_info expires-ms must be ms"))
        })?;
        let own = now + ms;
        expires_ms = if expires_ms == 0 { own } else { expires_ms.min(own) };
    }
    let timeout_ms = if s.timeout_ms > 0 { s.timeout_ms } else { req.remaining_ms() };
    Ok(Prepared {
        destination,
        reply_to,
        idempotency_key,
        arrived_ms: now,
        expires_ms,
        timeout_ms,
        priority: req.priority(),
    })
}

/// Checks a request and makes its record.
fn check<A: ServiceApi>(shared: &Shared<A>, req: &A::Request) -> Result<Checked, ServiceError> {
    let s = &shared.settings;
    let p = prepare(&shared.api, s, req)?;
    let mut store = shared.store.borrow_mut();
    if !p.idempotency_key.is_empty() && !s.dedup_window.is_zero() {
        if let Some(first) = store.duplicate_of(&p.idempotency_key, s) {
            store.counters.duplicates += 1;
            return Ok(Checked::Duplicate(first));
        }
    }
    if store.len() >= s.max_messages as usize {
        store.counters.refused_full += 1;
        return Err(ServiceError::new(
            Status::QueueFull,
            format!("queue {} is full: max_messages ({}) reached", shared.api.prefix(), s.max_messages),
        ));
    }
    Ok(Checked::Store(Stored {
        id: store.take_id(),
        arrived_ms: p.arrived_ms,
        expires_ms: p.expires_ms,
        timeout_ms: p.timeout_ms,
        priority: p.priority,
        dead: false,
        attempts: 0,
        history: Vec::new(),
        destination: p.destination,
        reply_to: p.reply_to,
        idempotency_key: p.idempotency_key,
        request_info: req.request_info().into(),
        request: req.body().into(),
    }))
}
