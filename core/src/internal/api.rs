//! The API an internal service instance uses: the calls of an external
//! instance, as direct calls into the core's state instead of frames.

use crate::instance::{InternalInbox, OwnedRequest, Response};
use crate::registry::InstanceId;
use crate::state::Shared;
use cumulo_proto::{Return, Send, Status, TransId, TransIdGen};
use std::cell::RefCell;
use std::rc::Rc;
use tokio::sync::{mpsc, oneshot};

pub struct InternalApi {
    core: Shared,
    id: InstanceId,
    inbox: Rc<InternalInbox>,
    requests: RefCell<mpsc::UnboundedReceiver<OwnedRequest>>,
    ids: RefCell<TransIdGen>,
    pub prefix: Rc<str>,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
}

/// Options of one send; zero timeout means the service's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOptions {
    pub timeout_ms: u32,
    pub priority: i8,
    pub wait_for_service: bool,
}

impl InternalApi {
    /// Registers a new internal instance with the core.
    #[allow(clippy::too_many_arguments, reason = "what an SDK says in HELLO, one argument per field")]
    pub fn connect(
        core: &Shared,
        prefix: &str,
        options: Rc<crate::config::ServiceOptions>,
        metrics: Rc<crate::metrics::ServiceMetrics>,
        service: crate::instance::ServiceId,
        process_index: u32,
        process_count: u32,
        thread_count: u32,
    ) -> Result<InternalApi, (Status, String)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let inbox = Rc::new(InternalInbox {
            requests: tx,
            waiting: Default::default(),
            unclaimed: Default::default(),
            unclaimed_wake: Default::default(),
        });
        let mut c = core.borrow_mut();
        let id = c.admit_internal(prefix, options, metrics, inbox.clone(), service, process_index)?;
        let node = c.limits.node_id;
        Ok(InternalApi {
            core: core.clone(),
            id,
            inbox,
            requests: RefCell::new(rx),
            ids: RefCell::new(TransIdGen::new(node, id)),
            prefix: Rc::from(prefix),
            process_index,
            process_count,
            thread_count,
        })
    }

    /// The core's state, with its clock read for this call.
    fn core(&self) -> std::cell::RefMut<'_, crate::state::Core> {
        let mut c = self.core.borrow_mut();
        c.refresh_now();
        c
    }

    /// Registers another internal instance beside this one, with its
    /// options and counters but outside any service: the HTTP gateway makes
    /// one per WebSocket connection, so that each connection is a name any
    /// service can send to.
    pub fn open_sibling(&self, prefix: &str) -> Result<InternalApi, (Status, String)> {
        let (options, metrics) = {
            let c = self.core.borrow();
            let me =
                c.instances.get(&self.id).ok_or((Status::ShuttingDown, "the gateway's instance is gone".into()))?;
            (me.options.clone(), me.metrics.clone())
        };
        InternalApi::connect(&self.core, prefix, options, metrics, 0, self.process_index, 1, 1)
    }

    /// The core's table of open WebSocket connections.
    pub fn websocket_table(&self) -> Rc<crate::internal::WebSocketTable> {
        self.core.borrow().websockets.clone()
    }

    pub fn instance_id(&self) -> InstanceId {
        self.id
    }

    /// The longest service name the core accepts (`core.max_name`).
    pub fn max_name(&self) -> usize {
        self.core.borrow().limits.names.max_name
    }

    pub fn subscribe(&self, pattern: &str) -> Result<(), (Status, String)> {
        self.core().subscribe(self.id, pattern)
    }

    pub fn unsubscribe(&self, pattern: &str) -> Result<(), (Status, String)> {
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
        let (tx, rx) = oneshot::channel();
        // Register before sending: an immediate error is answered inside send.
        let tid = self.ids.borrow_mut().next();
        self.inbox.waiting.borrow_mut().insert(tid, tx);
        self.send_with(tid, name, info, body, o, true);
        rx.await.unwrap_or(Response {
            trans_id: tid,
            status: Status::ShuttingDown,
            response_info: vec![],
            response: b"the core stopped".to_vec(),
        })
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
            {
                let mut q = self.inbox.unclaimed.borrow_mut();
                let pos = match tid {
                    Some(t) => q.iter().position(|r| r.trans_id == t),
                    None => (!q.is_empty()).then_some(0),
                };
                if let Some(p) = pos {
                    return q.remove(p).unwrap();
                }
            }
            self.inbox.unclaimed_wake.notified().await;
        }
    }

    /// The next request for this instance; None when the core stops.
    #[allow(
        clippy::await_holding_refcell_ref,
        reason = "one task per internal instance receives its requests; nothing else borrows `requests`"
    )]
    pub async fn next_request(&self) -> Option<OwnedRequest> {
        self.requests.borrow_mut().recv().await
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
            c.remove_instance(self.id, "internal service stopped");
        }
    }
}
