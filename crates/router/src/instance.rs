//! One instance (one connection, or one internal service thread) as the core
//! sees it: its window, its queue, its subscriptions and where its frames go.

use crate::metrics::ServiceMetrics;
use crate::queue::PriorityQueue;
use crate::registry::InstanceId;
use ahash::AHashMap;
use cumulo_config::ServiceOptions;
use cumulo_proto::TransId;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::time::Instant;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;

/// A request the core holds on to: queued, parked, or handed to an internal
/// service. Requests delivered at once to a socket are never copied into one.
#[derive(Debug, Clone)]
pub struct OwnedRequest {
    pub trans_id: TransId,
    pub sender: InstanceId,
    pub deadline: Instant,
    pub priority: i8,
    /// REQUEST flags (sync, multicast copy).
    pub flags: u8,
    pub wait_for_service: bool,
    pub name: Box<str>,
    /// The pattern it matched, once routed.
    pub pattern: Option<Rc<str>>,
    pub request_info: Box<[u8]>,
    pub request: Box<[u8]>,
    /// A multicast copy for another shard: the instance there that serves
    /// it (`Route::target`); 0 otherwise.
    pub target: InstanceId,
}

impl OwnedRequest {
    /// Milliseconds left before its deadline (at least 1, so a request is
    /// never delivered with a zero "use the default" timeout).
    pub fn remaining_ms(&self, now: Instant) -> u32 {
        remaining_ms(self.deadline, now)
    }
}

pub fn remaining_ms(deadline: Instant, now: Instant) -> u32 {
    (deadline.saturating_duration_since(now).as_millis() as u64).clamp(1, u32::MAX as u64) as u32
}

/// The answer to a send (the service API's type: services built on the core
/// see the same one).
pub use cumulo_service::Response;

/// Bytes waiting to be written to a connection. The routing code appends
/// frames; the connection's writer task swaps the buffer out and writes it in
/// one call, so everything routed in one turn of the event loop leaves in one
/// write.
pub struct Outbox {
    buf: RefCell<Vec<u8>>,
    wake: Notify,
    closed: Cell<bool>,
    /// Set when the peer fell more than the limit behind (a slow consumer).
    pub overflowed: Cell<bool>,
    /// Cancels the connection's reader when the core closes it.
    pub cancel: CancellationToken,
    max: usize,
}

impl Outbox {
    pub fn new(max: usize) -> Rc<Outbox> {
        Rc::new(Outbox {
            buf: RefCell::new(Vec::with_capacity(64 * 1024)),
            wake: Notify::new(),
            closed: Cell::new(false),
            overflowed: Cell::new(false),
            cancel: CancellationToken::new(),
            max,
        })
    }

    /// Appends frames; returns false (and closes) when the peer has fallen
    /// more than the limit behind.
    pub fn push(&self, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.closed.get() {
            return false;
        }
        let mut buf = self.buf.borrow_mut();
        let was_empty = buf.is_empty();
        write(&mut buf);
        let over = buf.len() > self.max;
        drop(buf);
        if was_empty {
            self.wake.notify_one();
        }
        if over {
            self.overflowed.set(true);
            self.close();
        }
        !over
    }

    /// Stops taking frames; what is buffered is still written, then the
    /// connection closes.
    pub fn close(&self) {
        if !self.closed.replace(true) {
            self.wake.notify_one();
            self.cancel.cancel();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    pub fn pending(&self) -> usize {
        self.buf.borrow().len()
    }

    /// Takes what is buffered without a writer task (tests and fuzzing).
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.buf.borrow_mut())
    }

    /// Waits for frames; swaps them into `into`. Returns false once closed
    /// and drained.
    pub async fn next_batch(&self, into: &mut Vec<u8>) -> bool {
        loop {
            {
                let mut buf = self.buf.borrow_mut();
                if !buf.is_empty() {
                    std::mem::swap(&mut *buf, into);
                    return true;
                }
                if self.closed.get() {
                    return false;
                }
            }
            self.wake.notified().await;
        }
    }
}

/// Where an internal service instance receives its traffic.
///
/// Both of its queues are bounded. Requests: in count by the instance's
/// window (only delivered requests enter it, and `delivered` counts them
/// until they are answered), in bytes by `max_bytes` (`core.max_outbox`, as
/// a socket instance's outbox): past it the instance has no room, so further
/// requests wait in its queue (`queue_limit`, `queue_size`, then
/// `QUEUE_FULL`) until its task takes some. Answers of send_async calls not
/// yet collected: `max_bytes` too, the oldest dropped with a warning.
pub struct InternalInbox {
    requests: RefCell<VecDeque<OwnedRequest>>,
    /// Bytes of `requests` (`held::weight`).
    request_bytes: Cell<usize>,
    requests_wake: Notify,
    /// send_sync callers waiting for one trans_id.
    pub waiting: RefCell<AHashMap<TransId, oneshot::Sender<Response>>>,
    /// Responses of send_async calls, until recv_async collects them.
    pub unclaimed: RefCell<VecDeque<Response>>,
    unclaimed_bytes: Cell<usize>,
    pub unclaimed_wake: Notify,
    max_bytes: usize,
}

impl InternalInbox {
    pub fn new(max_bytes: usize) -> InternalInbox {
        InternalInbox {
            requests: Default::default(),
            request_bytes: Cell::new(0),
            requests_wake: Notify::new(),
            waiting: Default::default(),
            unclaimed: Default::default(),
            unclaimed_bytes: Cell::new(0),
            unclaimed_wake: Notify::new(),
            max_bytes,
        }
    }

    /// Whether another request may be handed over: the bytes waiting are
    /// under the limit (so one request larger than the limit still passes
    /// when the inbox is empty).
    pub fn has_room(&self) -> bool {
        self.request_bytes.get() < self.max_bytes
    }

    /// Hands a delivered request to the instance's task.
    pub fn push(&self, r: OwnedRequest) {
        self.request_bytes.set(self.request_bytes.get() + r.held_bytes());
        self.requests.borrow_mut().push_back(r);
        self.requests_wake.notify_one();
    }

    /// The next request, and whether taking it made room that was missing
    /// (then requests queued for the instance may be delivered).
    pub fn take(&self) -> Option<(OwnedRequest, bool)> {
        let r = self.requests.borrow_mut().pop_front()?;
        let was_full = !self.has_room();
        self.request_bytes.set(self.request_bytes.get() - r.held_bytes());
        Some((r, was_full && self.has_room()))
    }

    /// Waits until a request may be there.
    pub async fn requests_ready(&self) {
        if self.requests.borrow().is_empty() {
            self.requests_wake.notified().await;
        }
    }

    /// Requests and bytes waiting for the instance's task.
    pub fn waiting_requests(&self) -> (usize, usize) {
        (self.requests.borrow().len(), self.request_bytes.get())
    }

    pub fn deliver(&self, r: Response) {
        if let Some(tx) = self.waiting.borrow_mut().remove(&r.trans_id) {
            let _ = tx.send(r);
            return;
        }
        let mut q = self.unclaimed.borrow_mut();
        let mut bytes = self.unclaimed_bytes.get() + response_bytes(&r);
        q.push_back(r);
        while bytes > self.max_bytes && q.len() > 1 {
            let old = q.pop_front().expect("more than one answer kept");
            bytes -= response_bytes(&old);
            tracing::warn!(
                "internal service: the answer to {} was dropped uncollected: more than {} bytes of answers wait for recv_async (core.max_outbox)",
                old.trans_id,
                self.max_bytes
            );
        }
        self.unclaimed_bytes.set(bytes);
        drop(q);
        self.unclaimed_wake.notify_waiters();
    }

    /// Takes the answer at `pos` of `unclaimed` (recv_async).
    pub fn claim(&self, pos: usize) -> Option<Response> {
        let r = self.unclaimed.borrow_mut().remove(pos)?;
        self.unclaimed_bytes.set(self.unclaimed_bytes.get() - response_bytes(&r));
        Some(r)
    }
}

/// What an uncollected answer costs, bytes (as `held::weight` for requests).
fn response_bytes(r: &Response) -> usize {
    r.response_info.len() + r.response.len() + crate::held::REQUEST_OVERHEAD
}

pub enum Endpoint {
    Socket(Rc<Outbox>),
    Internal(Rc<InternalInbox>),
    /// Another node of the cloud (a pseudo-instance, crates/cluster): the same
    /// REQUEST and RESPONSE frames as a socket's, published over NATS.
    Remote(Rc<Outbox>),
    /// Another shard of this core (a pseudo-instance, src/shards): the same
    /// frames, passed to that shard's thread over a channel.
    Shard(Rc<Outbox>),
}

impl Endpoint {
    /// A pseudo-instance standing for another node or another shard, not a
    /// connection or an internal service of this shard.
    pub fn is_pseudo(&self) -> bool {
        matches!(self, Endpoint::Remote(_) | Endpoint::Shard(_))
    }
}

/// A service's id: given in config order from 1, then to each service added
/// at run time; never reused while the core runs.
pub type ServiceId = u32;

/// Which service and process an instance belongs to (none for unmanaged ones).
#[derive(Debug, Clone)]
pub struct Origin {
    pub service: ServiceId,
    pub process_index: u32,
    /// The process's token (empty for an internal service's instance).
    pub token: Rc<str>,
}

pub struct Instance {
    pub(crate) id: InstanceId,
    pub(crate) prefix: Rc<str>,
    /// For logs: "/tests/http_req/ process 1 thread 0".
    pub(crate) label: String,
    pub(crate) origin: Option<Origin>,
    pub(crate) options: Rc<ServiceOptions>,
    /// Its service's counters (the unmanaged ones' for unmanaged instances).
    pub(crate) metrics: Rc<ServiceMetrics>,
    /// Told to TERMINATE (its process is being stopped): it gets no new
    /// requests and may not subscribe again.
    pub(crate) retiring: bool,
    pub(crate) window: u32,
    /// Requests delivered and not yet returned or forwarded.
    pub(crate) delivered: Vec<TransId>,
    pub(crate) queue: PriorityQueue<OwnedRequest>,
    pub(crate) subscriptions: Subscriptions,
    pub(crate) endpoint: Endpoint,
    /// When its reader last took bytes from it.
    pub(crate) last_rx: Instant,
    /// Keep-alive rounds in a row in which nothing came from it: nothing
    /// read since the previous round, nor waiting unread in its socket.
    /// Counted in rounds, not clock time, so that time the core itself
    /// could not read (its event loop stalled) never counts against it.
    pub(crate) silent_rounds: u32,
    /// Its socket's read side, to see whether bytes wait in it unread
    /// (none for internal instances and in-memory streams).
    pub(crate) rx_fd: Option<RawFd>,
    /// Speaks CloudI's protocol: CloudI's routing rules apply to what it
    /// sends (docs/CLOUDI.md, "Routing as in CloudI").
    pub(crate) cloudi: bool,
    /// An HTTP gateway of this core: a filesystem service of this core may
    /// answer it with an open file to stream instead of the bytes
    /// (internal/filesystem/stream.rs).
    pub(crate) takes_file_handles: bool,
    /// Its send rules (dest_list_allow / dest_list_deny); none: it may send
    /// to any name.
    pub(crate) acl: Option<Box<crate::trust::Acl>>,
    /// May subscribe no pattern under a configured service's prefix.
    pub(crate) outside_services: bool,
}

/// Who an instance is, as it is admitted: the rest of `Instance` starts
/// empty (nothing delivered, queued or subscribed).
pub struct Identity {
    pub prefix: Rc<str>,
    pub label: String,
    pub origin: Option<Origin>,
    pub options: Rc<ServiceOptions>,
    pub metrics: Rc<ServiceMetrics>,
    pub window: u32,
    /// An instance without a token held outside the configured services'
    /// prefixes (`core.*_anonymous = "outside_services"`).
    pub outside_services: bool,
}

/// What the rest of the node reads of an instance; the router alone
/// changes it.
impl Instance {
    #[inline]
    pub fn id(&self) -> InstanceId {
        self.id
    }
    /// The prefix its subscriptions are under.
    #[inline]
    pub fn prefix(&self) -> &Rc<str> {
        &self.prefix
    }
    /// How logs and the admin API name it.
    #[inline]
    pub fn label(&self) -> &str {
        &self.label
    }
    /// The configured service and process slot it belongs to, if any.
    #[inline]
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_ref()
    }
    #[inline]
    pub fn options(&self) -> &Rc<ServiceOptions> {
        &self.options
    }
    #[inline]
    pub fn metrics(&self) -> &Rc<ServiceMetrics> {
        &self.metrics
    }
    /// Being stopped: sent no new requests.
    #[inline]
    pub fn retiring(&self) -> bool {
        self.retiring
    }
    /// Requests it takes at once (the HELLO's window).
    #[inline]
    pub fn window(&self) -> u32 {
        self.window
    }
    /// Requests delivered to it and not answered yet.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.delivered.len()
    }
    /// Requests waiting in its queue.
    #[inline]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
    /// Where its frames go: a socket, an internal service, a shard, a node.
    #[inline]
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
    /// Its subscriptions (patterns, counted).
    #[inline]
    pub fn subscriptions(&self) -> &Subscriptions {
        &self.subscriptions
    }
    /// When the core last read from it.
    #[inline]
    pub fn last_rx(&self) -> Instant {
        self.last_rx
    }
    /// A CloudI-protocol connection.
    #[inline]
    pub fn is_cloudi(&self) -> bool {
        self.cloudi
    }
    /// Takes open files by handle (an HTTP gateway of this process).
    #[inline]
    pub fn takes_file_handles(&self) -> bool {
        self.takes_file_handles
    }
    /// Keep-alive rounds in a row it stayed silent through.
    #[inline]
    pub fn silent_rounds(&self) -> u32 {
        self.silent_rounds
    }

    /// From now on it is sent open files by handle.
    pub fn take_file_handles(&mut self) {
        self.takes_file_handles = true;
    }
    /// The descriptor the keep-alive looks at for bytes not read yet.
    pub fn set_rx_fd(&mut self, fd: Option<RawFd>) {
        self.rx_fd = fd;
    }
    /// It speaks CloudI's protocol.
    pub fn mark_cloudi(&mut self) {
        self.cloudi = true;
    }
    /// The core read from it at `now` (it is alive).
    #[inline]
    pub fn heard_from(&mut self, now: Instant) {
        self.last_rx = now;
    }

    pub fn new(id: InstanceId, who: Identity, endpoint: Endpoint) -> Instance {
        let Identity { prefix, label, origin, options, metrics, window, outside_services } = who;
        Instance {
            acl: crate::trust::Acl::of(&options),
            outside_services,
            id,
            prefix,
            label,
            origin,
            options,
            metrics,
            retiring: false,
            window,
            delivered: Vec::new(),
            queue: Default::default(),
            subscriptions: Subscriptions::default(),
            endpoint,
            last_rx: Instant::now(),
            silent_rounds: 0,
            rx_fd: None,
            cloudi: false,
            takes_file_handles: false,
        }
    }

    pub fn has_room(&self) -> bool {
        (self.delivered.len() as u32) < self.window
            && match &self.endpoint {
                Endpoint::Internal(inbox) => inbox.has_room(),
                Endpoint::Socket(_) | Endpoint::Remote(_) | Endpoint::Shard(_) => true,
            }
    }

    /// Room in its window and nothing queued before it: a request for it
    /// is delivered at once.
    pub fn is_free(&self) -> bool {
        self.has_room() && self.queue.is_empty()
    }

    /// Delivered plus queued: the "busy" measure of least-busy selection.
    pub fn load(&self) -> usize {
        self.delivered.len() + self.queue.len()
    }
}

/// An instance's subscriptions: pattern → how many times it subscribed it.
/// A map, not a list, so that removing one costs the same however many it
/// holds (another shard's pseudo-instance holds every subscription of that
/// shard, and removes them one by one as its instances close).
#[derive(Debug, Default)]
pub struct Subscriptions {
    counts: AHashMap<Rc<str>, u32>,
    total: usize,
}

impl Subscriptions {
    pub fn push(&mut self, pattern: Rc<str>) {
        *self.counts.entry(pattern).or_default() += 1;
        self.total += 1;
    }

    /// Removes one subscription of `pattern`; false if there was none.
    pub fn remove(&mut self, pattern: &str) -> bool {
        let Some(n) = self.counts.get_mut(pattern) else { return false };
        *n -= 1;
        if *n == 0 {
            self.counts.remove(pattern);
        }
        self.total -= 1;
        true
    }

    /// How many times `pattern` is subscribed.
    pub fn count(&self, pattern: &str) -> u32 {
        self.counts.get(pattern).copied().unwrap_or(0)
    }

    /// Subscriptions in all, a pattern subscribed twice counting twice.
    pub fn len(&self) -> usize {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Every subscription, a pattern subscribed twice appearing twice.
    pub fn iter(&self) -> impl Iterator<Item = &Rc<str>> {
        self.counts.iter().flat_map(|(p, n)| std::iter::repeat_n(p, *n as usize))
    }

    /// Every subscription, leaving none.
    pub fn take(&mut self) -> Vec<Rc<str>> {
        let all = self.iter().cloned().collect();
        *self = Subscriptions::default();
        all
    }
}

/// A request as a service built on the core sees it.
impl cumulo_service::Request for OwnedRequest {
    fn name(&self) -> &str {
        &self.name
    }
    fn request_info(&self) -> &[u8] {
        &self.request_info
    }
    fn body(&self) -> &[u8] {
        &self.request
    }
    fn priority(&self) -> i8 {
        self.priority
    }
    fn trans_id(&self) -> cumulo_proto::TransId {
        self.trans_id
    }
    fn remaining_ms(&self) -> u32 {
        OwnedRequest::remaining_ms(self, std::time::Instant::now())
    }
    fn take_body(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.request).into_vec()
    }
}
