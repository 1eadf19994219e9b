//! `filesystem`: serves the files of a directory, as CloudI's
//! `cloudi_service_filesystem` does. It subscribes `*` under its prefix and
//! answers `<prefix><path>/get` and `<prefix><path>/head` (the names the
//! HTTP gateway makes), so it serves browsers through the gateway and any
//! other service that sends it a request by name. HTTP semantics travel in
//! request_info and response_info: conditional requests (`If-None-Match`,
//! `If-Modified-Since` → 304), one byte range (`Range` → 206 / 416), the
//! content type from the extension, an index file for a directory.
//!
//! Small files are kept in a bounded cache (`cache.rs`); large ones are
//! never read whole: through the gateway they are streamed from the open
//! file (`stream.rs`), to other callers they are answered in one message
//! only up to `max_answer` bytes (a larger file is asked for by range).
//! Settings: docs/CONFIG.md.

//!
//! It reaches the core through the service API only (`cumulo-service`).
//! What it leaves for a gateway of its process is in [`stream`], the one
//! module the gateway uses.

mod answer;
mod cache;
mod lookup;
// The name and Range parsers are public only to the fuzz targets.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod path;
#[cfg(not(feature = "fuzzing"))]
mod path;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod range;
#[cfg(not(feature = "fuzzing"))]
mod range;
mod settings;
pub mod stream;

use answer::{Conditions, Reply};
use cache::{Cache, Entry};
use cumulo_service::{Request, ServiceApi};
use lookup::Found;
use settings::Settings;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// Checks `filesystem`'s settings without creating it (what a config file
/// and the admin API are checked against).
pub fn check_settings(table: &toml::Table) -> Result<(), String> {
    Settings::from_settings(table).map(drop)
}

pub struct Filesystem {
    settings: Settings,
}

impl Filesystem {
    pub fn from_settings(table: &toml::Table) -> Result<Filesystem, String> {
        Ok(Filesystem { settings: Settings::from_settings(table)? })
    }
}

impl Filesystem {
    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        if let Err(e) = api.subscribe("*") {
            return tracing::error!("filesystem: cannot subscribe '{}*': {}", api.prefix(), e.why());
        }
        tracing::info!("filesystem: serving {} as {}", self.settings.directory.display(), api.prefix());
        let cache = RefCell::new(Cache::new(self.settings.cache_size, self.settings.refresh));
        let server = Rc::new(Server { api, settings: self.settings, cache });
        while let Some(req) = server.api.next_request().await {
            // Requests wait on the disk concurrently, up to the window.
            let server = server.clone();
            tokio::task::spawn_local(async move { server.answer(req).await });
        }
    }
}

struct Server<A> {
    api: A,
    settings: Settings,
    cache: RefCell<Cache>,
}

/// What is served, once found.
enum Source {
    Memory(Rc<Entry>),
    Disk { entry: Rc<Entry>, file: std::fs::File },
}

impl<A: ServiceApi> Server<A> {
    async fn answer(&self, req: A::Request) {
        let reply = match path::parse(req.name(), self.api.prefix()) {
            Err(refusal) => Reply::refusal(&refusal),
            Ok(target) => {
                let mut conditions = Conditions::from_info(req.request_info());
                conditions.can_stream = self.api.sender_takes_file_handles(&req);
                match self.find(&target).await {
                    Err(refusal) => Reply::refusal(&refusal),
                    Ok(source) => answer::reply(source, target.method, &conditions, &self.settings).await,
                }
            }
        };
        self.api.return_(&req, cumulo_proto::Status::Ok, &reply.info, &reply.body);
    }

    /// The file a target names: from the cache while fresh, else from the disk.
    async fn find(&self, target: &path::Target) -> Result<Source, path::Refusal> {
        let key = target.key();
        let now = Instant::now();
        if let Some(e) = self.cache.borrow_mut().fresh(&key, now) {
            return Ok(Source::Memory(e));
        }
        let mut known = self.cache.borrow().known(&key);
        loop {
            let (root, segments, index) =
                (self.settings.directory.clone(), target.segments.clone(), self.settings.index.clone());
            let read_max = self.settings.cache_file_max;
            let known_now = known.clone();
            let found = tokio::task::spawn_blocking(move || {
                lookup::find(&root, &segments, &index, known_now.as_ref(), read_max)
            })
            .await
            .map_err(|_| path::Refusal::Forbidden("the file system call failed"))?;
            let mut cache = self.cache.borrow_mut();
            match found {
                Err(refusal) => {
                    cache.remove(&key);
                    return Err(refusal);
                }
                Ok(Found::Unchanged) => match cache.confirm(&key, now) {
                    Some(e) => return Ok(Source::Memory(e)),
                    // dropped from the cache meanwhile: read it again
                    None => known = None,
                },
                Ok(Found::Read(meta, bytes)) => {
                    let entry = Rc::new(Entry::new(meta, bytes.into()));
                    cache.insert(key, entry.clone());
                    return Ok(Source::Memory(entry));
                }
                Ok(Found::Open(meta, file)) => {
                    cache.remove(&key);
                    return Ok(Source::Disk { entry: Rc::new(Entry::new(meta, Default::default())), file });
                }
            }
        }
    }
}
