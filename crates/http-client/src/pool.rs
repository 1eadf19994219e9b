//! Keep-alive connections by origin, on hyper's HTTP/1 connection API.
//!
//! Every open connection, idle or busy, holds one permit of a semaphore of
//! `max_connections` and one of its origin's semaphore of
//! `max_connections_per_host`. At the origin's limit a request waits for a
//! connection to it coming back or closing; at the total limit, an idle
//! connection to another origin is closed to make room, else the request
//! waits for a permit or a connection coming back (within its deadline). At most `max_idle_per_host` wait idle
//! per origin, each for at most `idle_timeout`. Everything runs on the
//! core's thread: connection tasks are `spawn_local`, state is in `Cell`s.

use crate::connect::{self, Step, Stream};
use crate::error::Error;
use crate::outgoing::Origin;
use crate::settings::Settings;
use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsConnector;

/// How long a connection given back may take to be ready for the next
/// request before it is closed instead of kept (hyper finishes reading the
/// answer's end on its connection task).
const READY_WAIT: Duration = Duration::from_secs(1);
/// Turns of the event loop a connection given back is waited for inline.
const READY_TURNS: usize = 4;

/// One open connection, checked out for one request at a time.
pub struct Conn {
    pub sender: SendRequest<Full<Bytes>>,
    origin: Origin,
    /// Whether it served a request before (a failure on it may be the
    /// server closing it while idle: the request is tried once more).
    pub reused: bool,
    _permit: OwnedSemaphorePermit,
    _origin_permit: OwnedSemaphorePermit,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

pub struct Pool {
    idle: RefCell<HashMap<Origin, VecDeque<Idle>>>,
    slots: Arc<Semaphore>,
    /// Each origin's open connections, at most `max_per_origin` (the entry
    /// of an origin with none open is dropped by `sweep`).
    origin_slots: RefCell<HashMap<Origin, Arc<Semaphore>>>,
    max_per_origin: usize,
    /// Woken when a connection comes back idle, for requests waiting on a slot.
    returned: Notify,
    tls: TlsConnector,
    max_connections: usize,
    max_idle_per_host: usize,
    idle_timeout: Duration,
    opened: Cell<u64>,
    reuses: Cell<u64>,
}

impl Pool {
    pub fn new(tls: TlsConnector, settings: &Settings) -> Pool {
        Pool {
            idle: RefCell::default(),
            slots: Arc::new(Semaphore::new(settings.max_connections)),
            origin_slots: RefCell::default(),
            max_per_origin: settings.max_connections_per_host,
            returned: Notify::new(),
            tls,
            max_connections: settings.max_connections,
            max_idle_per_host: settings.max_idle_per_host,
            idle_timeout: settings.idle_timeout,
            opened: Cell::new(0),
            reuses: Cell::new(0),
        }
    }

    /// A connection to `origin`: an idle one, else a new one.
    pub async fn checkout(&self, origin: &Origin, step: &Cell<Step>) -> Result<Conn, Error> {
        loop {
            if let Some(conn) = self.take_idle(origin) {
                self.reuses.set(self.reuses.get() + 1);
                return Ok(conn);
            }
            let mine = self.origin_slots(origin);
            let origin_permit = match mine.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => {
                    // Every connection this origin may have is busy: one
                    // coming back idle, or closing, lets this request on.
                    step.set(Step::Slot);
                    let returned = self.returned.notified();
                    tokio::select! {
                        p = mine.clone().acquire_owned() => p.expect("the pool's semaphores are never closed"),
                        _ = returned => continue,
                    }
                }
            };
            if let Ok(permit) = self.slots.clone().try_acquire_owned() {
                return self.open_or_forget(origin, &mine, permit, origin_permit, step).await;
            }
            if self.close_one_idle() {
                continue;
            }
            step.set(Step::Slot);
            let returned = self.returned.notified();
            tokio::select! {
                permit = self.slots.clone().acquire_owned() => {
                    let permit = permit.expect("the pool's semaphores are never closed");
                    return self.open_or_forget(origin, &mine, permit, origin_permit, step).await;
                }
                _ = returned => continue,
            }
        }
    }

    /// The semaphore of `origin`'s open connections.
    fn origin_slots(&self, origin: &Origin) -> Arc<Semaphore> {
        let mut all = self.origin_slots.borrow_mut();
        all.entry(origin.clone()).or_insert_with(|| Arc::new(Semaphore::new(self.max_per_origin))).clone()
    }

    /// `open`, and when it fails, the origin's entry is dropped at once
    /// unless another request holds or awaits it: every unreachable host
    /// asked for would otherwise stay in the table until the next sweep,
    /// a table growing with the rate of failing requests.
    async fn open_or_forget(
        &self,
        origin: &Origin,
        mine: &Arc<Semaphore>,
        permit: OwnedSemaphorePermit,
        origin_permit: OwnedSemaphorePermit,
        step: &Cell<Step>,
    ) -> Result<Conn, Error> {
        let opened = self.open(origin, permit, origin_permit, step).await;
        // The table's Arc and `mine`: nobody else has a permit or waits.
        if opened.is_err() && Arc::strong_count(mine) == 2 && mine.available_permits() == self.max_per_origin {
            self.origin_slots.borrow_mut().remove(origin);
        }
        opened
    }

    async fn open(
        &self,
        origin: &Origin,
        permit: OwnedSemaphorePermit,
        origin_permit: OwnedSemaphorePermit,
        step: &Cell<Step>,
    ) -> Result<Conn, Error> {
        let stream: Stream = connect::connect(origin, &self.tls, step).await?;
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Error::new(crate::error::ErrorKind::Connect, format!("{origin}: {e}")))?;
        self.opened.set(self.opened.get() + 1);
        let label = origin.to_string();
        tokio::task::spawn_local(async move {
            if let Err(e) = connection.await {
                tracing::debug!("http_client: connection to {label} ended: {e}");
            }
        });
        Ok(Conn { sender, origin: origin.clone(), reused: false, _permit: permit, _origin_permit: origin_permit })
    }

    /// The most recently used idle connection to `origin` that is still
    /// open and not too old (the others are closed on the way).
    fn take_idle(&self, origin: &Origin) -> Option<Conn> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(origin)?;
        let mut found = None;
        while let Some(i) = list.pop_back() {
            if i.conn.sender.is_ready() && i.since.elapsed() < self.idle_timeout {
                found = Some(i.conn);
                break;
            }
        }
        if list.is_empty() {
            idle.remove(origin);
        }
        found.map(|mut c| {
            c.reused = true;
            c
        })
    }

    /// Closes the oldest idle connection (of any origin); whether there was one.
    fn close_one_idle(&self) -> bool {
        let mut idle = self.idle.borrow_mut();
        let oldest = idle.iter().filter_map(|(o, l)| l.front().map(|i| (i.since, o.clone()))).min_by_key(|(t, _)| *t);
        let Some((_, origin)) = oldest else { return false };
        if let Some(list) = idle.get_mut(&origin) {
            list.pop_front();
            if list.is_empty() {
                idle.remove(&origin);
            }
        }
        true
    }

    /// Gives back a connection whose answer was read to its end: kept idle
    /// once hyper says it is ready for another request, if there is room.
    /// hyper's connection task usually gets there within a turn or two of
    /// the event loop: given back at once then, so that the next request
    /// finds it; else once it is ready, by a task of its own.
    pub async fn give_back(self: &Rc<Self>, conn: Conn) {
        if self.max_idle_per_host == 0 {
            return;
        }
        for _ in 0..READY_TURNS {
            if conn.sender.is_ready() {
                return self.keep(conn);
            }
            if conn.sender.is_closed() {
                return;
            }
            tokio::task::yield_now().await;
        }
        let pool = Rc::downgrade(self);
        let mut conn = conn;
        tokio::task::spawn_local(async move {
            let ready = tokio::time::timeout(READY_WAIT, conn.sender.ready()).await;
            if let (Some(pool), Ok(Ok(()))) = (pool.upgrade(), ready) {
                pool.keep(conn);
            }
        });
    }

    fn keep(&self, mut conn: Conn) {
        let mut idle = self.idle.borrow_mut();
        if idle.get(&conn.origin).map_or(0, VecDeque::len) >= self.max_idle_per_host {
            return; // closed: dropping it ends its connection task
        }
        conn.reused = true;
        idle.entry(conn.origin.clone()).or_default().push_back(Idle { conn, since: Instant::now() });
        drop(idle);
        self.returned.notify_waiters();
    }

    /// Closes the idle connections that timed out or that their server closed.
    pub fn sweep(&self) {
        let mut idle = self.idle.borrow_mut();
        for list in idle.values_mut() {
            list.retain(|i| !i.conn.sender.is_closed() && i.since.elapsed() < self.idle_timeout);
        }
        idle.retain(|_, l| !l.is_empty());
        drop(idle);
        // An origin with no connection open holds all its permits.
        let max = self.max_per_origin;
        self.origin_slots.borrow_mut().retain(|_, s| s.available_permits() < max);
    }

    /// Origins with an entry in the per-origin table.
    #[cfg(test)]
    pub fn origins(&self) -> usize {
        self.origin_slots.borrow().len()
    }

    /// Open connections, idle or busy.
    pub fn open_count(&self) -> usize {
        self.max_connections - self.slots.available_permits()
    }

    pub fn idle_count(&self) -> usize {
        self.idle.borrow().values().map(VecDeque::len).sum()
    }

    /// Origins with idle connections, and how many each.
    pub fn idle_by_origin(&self) -> Vec<(String, usize)> {
        let mut v: Vec<_> = self.idle.borrow().iter().map(|(o, l)| (o.to_string(), l.len())).collect();
        v.sort();
        v
    }

    pub fn opened(&self) -> u64 {
        self.opened.get()
    }

    pub fn reuses(&self) -> u64 {
        self.reuses.get()
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    pub fn max_connections_per_host(&self) -> usize {
        self.max_per_origin
    }
}
