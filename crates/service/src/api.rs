use crate::{Report, ServiceError};
use cumulo_proto::{Status, TransId};
use std::future::Future;
use std::rc::Rc;

/// Options of one send; a zero timeout means the service's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SendOptions {
    pub timeout_ms: u32,
    pub priority: i8,
    pub wait_for_service: bool,
}

/// The answer to a send: a response, or the error that ended the request.
#[derive(Debug, Clone)]
pub struct Response {
    pub trans_id: TransId,
    pub status: Status,
    pub response_info: Vec<u8>,
    pub response: Vec<u8>,
}

/// A request delivered to a service instance, as the handler sees it.
pub trait Request {
    /// The name it was sent to.
    fn name(&self) -> &str;
    fn request_info(&self) -> &[u8];
    fn body(&self) -> &[u8];
    fn priority(&self) -> i8;
    fn trans_id(&self) -> TransId;
    /// Milliseconds left before its sender stops waiting (at least 1).
    fn remaining_ms(&self) -> u32;
    /// Moves the body out (it is empty after), for a handler that passes it
    /// on whole (a gateway pushing it to a WebSocket) and answers after.
    fn take_body(&mut self) -> Vec<u8> {
        self.body().to_vec()
    }
}

/// The calls of one service instance. Everything runs on the core's event
/// loop (single-threaded: values are `Rc`, futures are not `Send`).
pub trait ServiceApi {
    type Request: Request + 'static;

    /// The service's prefix, e.g. `/queue/`.
    fn prefix(&self) -> &str;
    /// Processes of the service (`count_process`) and this one's index.
    fn process_index(&self) -> u32;
    fn process_count(&self) -> u32;
    fn thread_count(&self) -> u32;
    /// The largest request the core carries (`core.max_frame`, less framing).
    fn max_request(&self) -> usize;
    /// The longest service name the core accepts (`core.max_name`).
    fn max_name(&self) -> usize;
    /// The index of the shard (event-loop thread) this instance runs on,
    /// and the number of shards (`core.threads`).
    fn shard(&self) -> (u32, u32);
    /// Another instance beside this one, with its options and counters but
    /// outside any service, until it is dropped: a name of its own that any
    /// service can send to (the HTTP gateway opens one per WebSocket
    /// connection). `prefix` is prepended to what it subscribes.
    fn open_sibling(&self, prefix: &str) -> Result<Self, ServiceError>
    where
        Self: Sized;
    /// Says that this instance (an HTTP gateway) takes open files by handle
    /// from a filesystem service of this process, instead of their bytes.
    fn take_file_handles(&self);

    fn subscribe(&self, pattern: &str) -> Result<(), ServiceError>;
    /// Drops one subscription of `pattern` (subscriptions count).
    fn unsubscribe(&self, pattern: &str) -> Result<(), ServiceError>;
    /// Whether some service subscribes a pattern matching `name` (a send
    /// to it would not fail with NO_SERVICE). A probe, not for every send.
    fn is_served(&self, name: &str) -> bool;
    /// The next request for this instance; `None` once the core stops.
    fn next_request(&self) -> impl Future<Output = Option<Self::Request>>;
    /// Answers `req`.
    fn return_(&self, req: &Self::Request, status: Status, info: &[u8], body: &[u8]);
    /// Sends now (the arguments are copied) and returns the wait for the
    /// answer, which borrows nothing.
    fn call(
        &self,
        name: &str,
        info: &[u8],
        body: &[u8],
        o: SendOptions,
    ) -> impl Future<Output = Response> + 'static + use<Self>;
    /// Sends and returns at once; the answer is collected with
    /// [`recv_async`](ServiceApi::recv_async).
    fn send_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> TransId;
    /// The answer of an async send: of `tid`, or the next one to arrive.
    fn recv_async(&self, tid: Option<TransId>) -> impl Future<Output = Response>;
    /// One copy to every instance subscribed to `name`: their trans_ids.
    fn mcast_async(&self, name: &str, info: &[u8], body: &[u8], o: SendOptions) -> Vec<TransId>;
    /// Hands `req` on to `name`; whoever serves it answers the sender.
    fn forward(&self, req: &Self::Request, name: &str, info: &[u8], body: &[u8], o: SendOptions);
    /// Whether the sender of `req` is a gateway of this process that takes
    /// an open file by handle instead of its bytes (the filesystem service
    /// streams large files so). A forward keeps the sender.
    fn sender_takes_file_handles(&self, req: &Self::Request) -> bool;
    /// Publishes this instance's state to the admin API, `/metrics` and the
    /// dashboard until the instance stops.
    fn report(&self, report: Rc<dyn Report>);
    /// Where a service that records spans of its own (the gateway's
    /// SERVER span) hands them, when `[tracing]` is on (docs/TRACING.md).
    fn tracer(&self) -> Option<cumulo_trace::Recorder> {
        None
    }
}
