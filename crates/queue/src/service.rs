//! The queue as a running service: its requests, its deliveries and its
//! compaction, three loops on the core's event loop around one state.

use crate::settings::{Mode, Settings};
use crate::store::Store;
use cumulo_service::{ServiceApi, ServiceError, Status};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinSet;

/// How often drained segments are looked for.
const COMPACT_EVERY: Duration = Duration::from_secs(1);

/// One queue: its settings, checked, and nothing opened yet.
pub struct Queue {
    settings: Settings,
}

/// What the loops share.
pub(crate) struct Shared<A: ServiceApi> {
    pub api: A,
    pub settings: Settings,
    pub store: RefCell<Store>,
    /// Wakes the delivery loop: a request arrived, an attempt ended.
    pub wake: Notify,
    /// Senders waiting for the destination's answer (`mode = "destination"`).
    pub waiters: RefCell<HashMap<u64, Vec<A::Request>>>,
}

impl Queue {
    /// Checks the settings, and that the directory can be created and
    /// written: a queue that cannot keep what it accepts must not start.
    pub fn from_settings(t: &toml::Table) -> Result<Queue, String> {
        let settings = Settings::parse(t)?;
        if settings.backend != crate::settings::Backend::File {
            return Err("queue: backend = \"jetstream\" is served by cumulo-queue-jetstream, not this crate".into());
        }
        let dir = &settings.dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("queue: cannot create settings.dir {}: {e}", dir.display()))?;
        let probe = dir.join(".cumulo-write-check");
        std::fs::write(&probe, b"")
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| format!("queue: settings.dir {} is not writable: {e}", dir.display()))?;
        Ok(Queue { settings })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Runs the queue until the future is dropped (the service stops):
    /// every task it started ends with it, and the log closes.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let prefix = api.prefix().to_string();
        if api.process_count() * api.thread_count() > 1 {
            tracing::error!("queue {prefix}: count_process and count_thread must be 1 (one log per queue)");
            return;
        }
        let store = match Store::open(&self.settings) {
            Ok(s) => s,
            Err(why) => {
                tracing::error!("queue {prefix}: cannot open its log in {}: {why}", self.settings.dir.display());
                return;
            }
        };
        let recovered = store.len();
        let shared = Rc::new(Shared {
            api,
            settings: self.settings,
            store: RefCell::new(store),
            wake: Notify::new(),
            waiters: RefCell::new(HashMap::new()),
        });
        if let Err(e) = shared.api.subscribe("*") {
            tracing::error!("queue {prefix}: cannot subscribe: {}", e.why());
            return;
        }
        shared.api.report(Rc::new(crate::report::QueueReport::new(&shared)));
        tracing::info!(
            "queue {prefix}: log in {} ({} requests recovered), mode {}",
            shared.settings.dir.display(),
            recovered,
            match shared.settings.mode {
                Mode::Destination => "destination",
                Mode::Accepted => "accepted",
            }
        );
        let intakes = RefCell::new(JoinSet::new());
        let attempts = RefCell::new(JoinSet::new());
        tokio::join!(accept(&shared, &intakes), crate::delivery::deliver(&shared, &attempts), compact(&shared));
    }
}

/// Takes each request as it comes; each is stored in a task of its own, so
/// that concurrent senders share one fdatasync (group commit).
async fn accept<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>, tasks: &RefCell<JoinSet<()>>) {
    while let Some(req) = shared.api.next_request().await {
        let mut tasks = tasks.borrow_mut();
        while tasks.try_join_next().is_some() {}
        tasks.spawn_local(crate::intake::take(shared.clone(), req));
    }
}

/// Deletes drained segments, and moves the few requests that keep an old
/// segment alive to the head of the log.
async fn compact<A: ServiceApi + 'static>(shared: &Rc<Shared<A>>) {
    let mut removed_through = None;
    loop {
        tokio::time::sleep(COMPACT_EVERY).await;
        let relocate = shared.store.borrow_mut().take_relocation(shared.settings.segment_bytes);
        if let Some((from, moved)) = relocate {
            let records = moved.iter().map(crate::record::encode_put).collect();
            let written = shared.store.borrow().log().append_many(records);
            match written.await {
                Ok(positions) => shared.store.borrow_mut().relocated(from, &moved, &positions),
                Err(e) => {
                    shared.store.borrow_mut().relocation_failed();
                    tracing::warn!("queue {}: compaction could not rewrite segment {from}: {e}", shared.api.prefix());
                }
            }
        }
        let through = shared.store.borrow().removable_through();
        if let Some(s) = through.filter(|s| Some(*s) > removed_through) {
            // The log's writer thread unlinks and fsyncs the directory: no
            // disk I/O on the event loop.
            let removed = shared.store.borrow().log().remove_through_async(s);
            match removed.await {
                Ok(_) => removed_through = Some(s),
                Err(e) => tracing::warn!("queue {}: cannot delete drained segments: {e}", shared.api.prefix()),
            }
        }
    }
}

/// Answers `req` with an error from this queue.
pub(crate) fn refuse<A: ServiceApi>(api: &A, req: &A::Request, e: ServiceError) {
    api.return_(req, e.status(), b"", e.why().as_bytes());
}

/// The `request_info` of a queue's own answer: its id.
pub(crate) fn id_info(id: u64) -> Vec<u8> {
    let mut info = Vec::new();
    cumulo_service::info::push(&mut info, b"queue-id", id.to_string().as_bytes());
    info
}

pub fn status_name(code: u16) -> &'static str {
    match Status::from_code(code) {
        Status::Other(_) => "OTHER",
        s => s.name(),
    }
}
