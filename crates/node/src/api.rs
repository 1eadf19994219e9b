//! The API an internal service instance uses: the calls of an external
//! instance, as direct calls into the core's state instead of frames.

use cumulo_proto::{Return, Send, Status, TransId, TransIdGen};
use cumulo_router::InstanceId;
use cumulo_router::RouteError;
use cumulo_router::Shared;
use cumulo_router::{InternalInbox, OwnedRequest, Response};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use tokio::sync::oneshot;

pub struct InternalApi {
    core: Shared,
    id: InstanceId,
    inbox: Rc<InternalInbox>,
    ids: RefCell<TransIdGen>,
    pub prefix: Rc<str>,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
}

/// Options of one send; zero timeout means the service's default.
pub use cumulo_service::SendOptions;

impl InternalApi {
    /// Registers a new internal instance with the core.
    #[allow(clippy::too_many_arguments, reason = "what an SDK says in HELLO, one argument per field")]
    pub fn connect(
        core: &Shared,
        prefix: &str,
        options: Rc<cumulo_config::ServiceOptions>,
        metrics: Rc<cumulo_router::ServiceMetrics>,
        service: cumulo_router::ServiceId,
        process_index: u32,
        process_count: u32,
        thread_count: u32,
    ) -> Result<InternalApi, RouteError> {
        let mut c = core.borrow_mut();
        let inbox = Rc::new(InternalInbox::new(c.limits().max_outbox));
        let id = c.admit_internal(prefix, options, metrics, inbox.clone(), service, process_index)?;
        let node = c.limits().node_id;
        Ok(InternalApi {
            core: core.clone(),
            id,
            inbox,
            ids: RefCell::new(TransIdGen::new(node, id)),
            prefix: Rc::from(prefix),
            process_index,
            process_count,
            thread_count,
        })
    }

    /// The core's state, with its clock read for this call.
    fn core(&self) -> std::cell::RefMut<'_, cumulo_router::Core> {
        let mut c = self.core.borrow_mut();
        c.refresh_now();
        c
    }

    /// Registers another internal instance beside this one, with its
    /// options and counters but outside any service: the HTTP gateway makes
    /// one per WebSocket connection, so that each connection is a name any
    /// service can send to.
    pub fn open_sibling(&self, prefix: &str) -> Result<InternalApi, RouteError> {
        let (options, metrics) = {
            let c = self.core.borrow();
            let me = c
                .instance(&self.id)
                .ok_or_else(|| RouteError::new(Status::ShuttingDown, "the gateway's instance is gone"))?;
            (me.options().clone(), me.metrics().clone())
        };
        InternalApi::connect(&self.core, prefix, options, metrics, 0, self.process_index, 1, 1)
    }

    pub fn instance_id(&self) -> InstanceId {
        self.id
    }

    /// Says that this instance (an HTTP gateway) can take open files a
    /// filesystem service of this core hands over (stream.rs).
    pub fn take_file_handles(&self) {
        if let Some(me) = self.core.borrow_mut().instance_mut(&self.id) {
            me.take_file_handles();
        }
    }

    /// Whether `sender` (a request's sender: forwards keep it) can take an
    /// open file instead of the bytes. Only an instance of this core can.
    pub fn takes_file_handles(&self, sender: InstanceId) -> bool {
        self.core.borrow().instance(&sender).is_some_and(|i| i.takes_file_handles())
    }

    /// The longest service name the core accepts (`core.max_name`).
    pub fn max_name(&self) -> usize {
        self.core.borrow().limits().names.max_name
    }

    /// Whether a service subscribes a pattern matching `name`: an instance
    /// of this shard, or of another shard or node (their subscriptions are
    /// mirrored into this shard's registry). Not cached: for probes on an
    /// error path, not for routing.
    pub fn is_served(&self, name: &str) -> bool {
        self.core.borrow().registry().serves(name)
    }

    /// This shard's index and the number of shards (`core.threads`).
    pub fn shard(&self) -> (u32, u32) {
        let s = self.core.borrow().shard();
        (s.index, s.count)
    }

    pub fn subscribe(&self, pattern: &str) -> Result<(), RouteError> {
        self.core().subscribe(self.id, pattern)
    }

    pub fn unsubscribe(&self, pattern: &str) -> Result<(), RouteError> {
        self.core().unsubscribe(self.id, pattern)
    }

    pub fn subscribe_count(&self, pattern: &str) -> u32 {
        self.core.borrow().subscribe_count(self.id, pattern)
    }

    fn send_with(&self, tid: TransId, name: &str, info: &[u8], body: &[u8], o: SendOptions, sync: bool) {
        let s = Send {
            trans_id: tid,
            timeout: o.timeout_ms,
            priority: o.priority,
            flags: if o.wait_for_service { cumulo_proto::SEND_WAIT_FOR_SERVICE } else { 0 },
            name,
            request_info: info,
            request: body,
        };
        self.core().send(self.id, &s, sync);
    }

    /// Sends and returns at once; collect the answer with `recv_async`.
    pub fn send_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> TransId {
        let tid = self.ids.borrow_mut().next();
        self.send_with(tid, name, info, body, o, false);
        tid
    }

    /// Sends and waits for the answer (or the error that ended the request).
    pub async fn send_sync(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Response {
        self.call(name, info, body, o).await
    }

    /// Sends now (the request is copied into its frame) and returns the
    /// wait for its answer, which borrows none of the arguments: a caller
    /// may drop the request's bytes while it waits.
    pub fn call(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> impl Future<Output = Response> {
        let (tx, rx) = oneshot::channel();
        // Register before sending: an immediate error is answered inside send.
        let tid = self.ids.borrow_mut().next();
        self.inbox.waiting.borrow_mut().insert(tid, tx);
        self.send_with(tid, name, info, body, o, true);
        async move {
            rx.await.unwrap_or(Response {
                trans_id: tid,
                status: Status::ShuttingDown,
                response_info: vec![],
                response: b"the core stopped".to_vec(),
            })
        }
    }

    /// Multicast: the trans_ids of the copies sent.
    pub fn mcast_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Vec<TransId> {
        let tid = self.ids.borrow_mut().next();
        let s = Send {
            trans_id: tid,
            timeout: o.timeout_ms,
            priority: o.priority,
            flags: 0,
            name,
            request_info: info,
            request: body,
        };
        let (ids, failed) = self.core().mcast(self.id, &s);
        let c = self.core.borrow();
        for (t, status, msg) in failed {
            c.respond(self.id, &t, status, b"", msg.as_bytes());
        }
        ids
    }

    /// The answer of an async send: of `tid`, or the next one to arrive.
    pub async fn recv_async(&self, tid: Option<TransId>) -> Response {
        loop {
            let pos = {
                let q = self.inbox.unclaimed.borrow();
                match tid {
                    Some(t) => q.iter().position(|r| r.trans_id == t),
                    None => (!q.is_empty()).then_some(0),
                }
            };
            if let Some(r) = pos.and_then(|p| self.inbox.claim(p)) {
                return r;
            }
            self.inbox.unclaimed_wake.notified().await;
        }
    }

    /// The next request for this instance. Taking one may make room for
    /// requests queued while its inbox was full: they are delivered now.
    pub async fn next_request(&self) -> Option<OwnedRequest> {
        loop {
            if let Some((r, made_room)) = self.inbox.take() {
                if made_room {
                    self.core().pump(self.id);
                }
                return Some(r);
            }
            self.inbox.requests_ready().await;
        }
    }

    /// Requests and bytes delivered to this instance that its task has not
    /// taken yet.
    pub fn waiting_requests(&self) -> (usize, usize) {
        self.inbox.waiting_requests()
    }

    pub fn return_(&self, req: &OwnedRequest, status: Status, info: &[u8], body: &[u8]) {
        let r = Return { trans_id: req.trans_id, status: status.code(), response_info: info, response: body };
        self.core().ret(self.id, &r);
    }

    pub fn forward(&self, req: &OwnedRequest, name: &str, info: &[u8], body: &[u8], o: SendOptions) {
        let s = Send {
            trans_id: req.trans_id,
            timeout: o.timeout_ms,
            priority: o.priority,
            flags: 0,
            name,
            request_info: info,
            request: body,
        };
        self.core().forward(self.id, &s);
    }
}

impl Drop for InternalApi {
    fn drop(&mut self) {
        if let Ok(mut c) = self.core.try_borrow_mut() {
            c.reports_mut().remove_owner(u64::from(self.id));
            c.remove_instance(self.id, "internal service stopped");
        }
    }
}

/// The service API of services that are crates of their own (the queue):
/// the same calls, through the trait of `cumulo-service`.
impl cumulo_service::ServiceApi for InternalApi {
    type Request = OwnedRequest;

    fn prefix(&self) -> &str {
        &self.prefix
    }
    fn process_index(&self) -> u32 {
        self.process_index
    }
    fn process_count(&self) -> u32 {
        self.process_count
    }
    fn thread_count(&self) -> u32 {
        self.thread_count
    }
    fn max_request(&self) -> usize {
        self.core.borrow().limits().max_frame as usize
    }
    fn max_name(&self) -> usize {
        InternalApi::max_name(self)
    }
    fn tracer(&self) -> Option<cumulo_service::trace::Recorder> {
        self.core.borrow().tracer()
    }
    fn shard(&self) -> (u32, u32) {
        InternalApi::shard(self)
    }
    fn open_sibling(&self, prefix: &str) -> Result<InternalApi, cumulo_service::ServiceError> {
        InternalApi::open_sibling(self, prefix).map_err(Into::into)
    }
    fn take_file_handles(&self) {
        InternalApi::take_file_handles(self)
    }
    fn subscribe(&self, pattern: &str) -> Result<(), cumulo_service::ServiceError> {
        InternalApi::subscribe(self, pattern).map_err(Into::into)
    }
    fn is_served(&self, name: &str) -> bool {
        InternalApi::is_served(self, name)
    }
    async fn next_request(&self) -> Option<OwnedRequest> {
        InternalApi::next_request(self).await
    }
    fn return_(&self, req: &OwnedRequest, status: Status, info: &[u8], body: &[u8]) {
        InternalApi::return_(self, req, status, info, body)
    }
    fn unsubscribe(&self, pattern: &str) -> Result<(), cumulo_service::ServiceError> {
        InternalApi::unsubscribe(self, pattern).map_err(Into::into)
    }
    fn call(
        &self,
        name: &str,
        info: &[u8],
        body: &[u8],
        o: SendOptions,
    ) -> impl Future<Output = Response> + 'static + use<> {
        InternalApi::call(self, name, info, body, o)
    }
    fn send_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> TransId {
        InternalApi::send_async(self, name, info, body, o)
    }
    async fn recv_async(&self, tid: Option<TransId>) -> Response {
        InternalApi::recv_async(self, tid).await
    }
    fn mcast_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Vec<TransId> {
        InternalApi::mcast_async(self, name, info, body, o)
    }
    fn forward(&self, req: &OwnedRequest, name: &str, info: &[u8], body: &[u8], o: SendOptions) {
        InternalApi::forward(self, req, name, info, body, o)
    }
    fn sender_takes_file_handles(&self, req: &OwnedRequest) -> bool {
        self.takes_file_handles(req.sender)
    }
    fn report(&self, report: Rc<dyn cumulo_service::Report>) {
        self.core.borrow_mut().reports_mut().set(u64::from(self.id), report);
    }
}

/// A service built into the core. One value is created per instance
/// (count_process x count_thread of them); `run` owns its instance's API
/// until the core stops.
pub trait InternalService {
    fn run(self: Box<Self>, api: InternalApi) -> Pin<Box<dyn Future<Output = ()>>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{run, small_limits};
    use cumulo_config::ServiceOptions;
    use std::time::Duration;

    /// An internal instance whose task does not take its requests holds at
    /// most `max_outbox` bytes of them (plus one); the rest wait in its
    /// queue, and past `queue_limit` are refused with QUEUE_FULL at once.
    /// Once it takes them, the queued ones are delivered and answered.
    #[test]
    fn an_internal_inbox_is_bounded_in_bytes_and_the_rest_queue_then_fail_queue_full() {
        run(async {
            let limits = cumulo_router::Limits { max_outbox: 8 * 1024, ..small_limits() };
            let core: Shared = Rc::new(RefCell::new(cumulo_router::Core::new(limits, ServiceOptions::default())));
            let options = Rc::new(ServiceOptions { queue_limit: 2, ..ServiceOptions::default() });
            let slow = InternalApi::connect(&core, "/slow/", options, Rc::default(), 0, 0, 1, 1).unwrap();
            slow.subscribe("*").unwrap();
            let sender = InternalApi::connect(&core, "/sender/", Rc::default(), Rc::default(), 0, 0, 1, 1).unwrap();
            let body = vec![7u8; 3000];
            let o = SendOptions { timeout_ms: 60_000, ..SendOptions::default() };
            let sent: Vec<TransId> = (0..10).map(|_| sender.send_async("/slow/x", b"", &body, o)).collect();

            // Three requests (3 x ~3.3 KiB) fill the 8 KiB inbox; two more
            // queue; five are refused at once.
            let (count, bytes) = slow.waiting_requests();
            assert_eq!(count, 3, "requests handed to the instance ({bytes} bytes)");
            let mut refused = Vec::new();
            while let Ok(r) = tokio::time::timeout(Duration::from_millis(1), sender.recv_async(None)).await {
                assert_eq!(r.status, Status::QueueFull, "{:?}", String::from_utf8_lossy(&r.response));
                refused.push(r.trans_id);
            }
            assert_eq!(refused, sent[5..].to_vec());

            // Taking and answering them delivers the queued ones.
            for _ in 0..5 {
                let req = tokio::time::timeout(Duration::from_secs(1), slow.next_request()).await.unwrap().unwrap();
                slow.return_(&req, Status::Ok, b"", b"done");
            }
            for tid in &sent[..5] {
                let r = tokio::time::timeout(Duration::from_secs(1), sender.recv_async(Some(*tid))).await.unwrap();
                assert_eq!((r.status, &r.response[..]), (Status::Ok, &b"done"[..]));
            }
            assert_eq!(slow.waiting_requests(), (0, 0));
        });
    }

    /// Answers to send_async calls that are never collected keep at most
    /// `max_outbox` bytes: the oldest are dropped.
    #[test]
    fn uncollected_async_answers_are_bounded_oldest_dropped() {
        run(async {
            let limits = cumulo_router::Limits { max_outbox: 8 * 1024, ..small_limits() };
            let core: Shared = Rc::new(RefCell::new(cumulo_router::Core::new(limits, ServiceOptions::default())));
            let server = InternalApi::connect(&core, "/server/", Rc::default(), Rc::default(), 0, 0, 1, 1).unwrap();
            server.subscribe("*").unwrap();
            let sender = InternalApi::connect(&core, "/sender/", Rc::default(), Rc::default(), 0, 0, 1, 1).unwrap();
            let o = SendOptions { timeout_ms: 60_000, ..SendOptions::default() };
            let sent: Vec<TransId> = (0..5).map(|_| sender.send_async("/server/x", b"", b"", o)).collect();
            for _ in 0..5 {
                let req = server.next_request().await.unwrap();
                server.return_(&req, Status::Ok, b"", &[1u8; 3000]);
            }
            // Two answers of ~3.3 KiB fit in 8 KiB: the last two are kept.
            let mut kept = Vec::new();
            while let Ok(r) = tokio::time::timeout(Duration::from_millis(1), sender.recv_async(None)).await {
                kept.push(r.trans_id);
            }
            assert_eq!(kept, sent[3..].to_vec());
        });
    }
}
