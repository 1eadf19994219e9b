//! A found file → the answer: 304 when the caller's copy is current, 206 or
//! 416 for a byte range, else 200; headers in response_info, the bytes in
//! the response, or (for a large file or large cached bytes through the
//! gateway) a handle to take them from (stream.rs).

use super::path::{Method, Refusal};
use super::range::{self, Ranged};
use super::settings::Settings;
use super::{stream, Source};
use bytes::Bytes;
use cumulo_proto::info;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The request headers that change the answer.
#[derive(Default)]
pub struct Conditions {
    if_none_match: Option<Vec<u8>>,
    if_modified_since: Option<Vec<u8>>,
    range: Option<Vec<u8>>,
    if_range: Option<Vec<u8>>,
    /// The sender is a gateway of this core: it can stream a file (stream.rs).
    pub can_stream: bool,
}

impl Conditions {
    pub fn from_info(request_info: &[u8]) -> Conditions {
        let mut c = Conditions::default();
        // A malformed request_info only loses its conditions: the file is
        // still served whole.
        for (k, v) in info::parse(request_info).map_while(Result::ok) {
            let slot = match k.to_ascii_lowercase().as_slice() {
                b"if-none-match" => &mut c.if_none_match,
                b"if-modified-since" => &mut c.if_modified_since,
                b"range" => &mut c.range,
                b"if-range" => &mut c.if_range,
                _ => continue,
            };
            *slot = Some(v.to_vec());
        }
        c
    }

    /// RFC 9110 section 13.1: If-None-Match wins over If-Modified-Since.
    fn not_modified(&self, etag: &str, modified: SystemTime) -> bool {
        if let Some(list) = &self.if_none_match {
            let list = String::from_utf8_lossy(list);
            return list.split(',').map(str::trim).any(|t| t == "*" || t.trim_start_matches("W/") == etag);
        }
        let Some(since) = self.if_modified_since.as_deref().and_then(|v| std::str::from_utf8(v).ok()) else {
            return false;
        };
        let Ok(since) = httpdate::parse_http_date(since.trim()) else { return false };
        whole_seconds(modified) <= since
    }

    /// The range to serve; If-Range that does not match means the whole file.
    fn range(&self, etag: &str, last_modified: &str, size: u64) -> Ranged {
        let Some(header) = &self.range else { return Ranged::Whole };
        if let Some(v) = &self.if_range {
            if v != etag.as_bytes() && v != last_modified.as_bytes() {
                return Ranged::Whole;
            }
        }
        range::parse(header, size)
    }
}

/// HTTP dates have whole seconds.
fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    UNIX_EPOCH + Duration::from_secs(secs)
}

pub struct Reply {
    pub info: Vec<u8>,
    /// Bytes of the cache are shared, not copied.
    pub body: Bytes,
}

impl Reply {
    fn new(status: u16, body: Bytes) -> Reply {
        let mut info = Vec::with_capacity(256);
        info::push(&mut info, b"status", status.to_string().as_bytes());
        Reply { info, body }
    }

    fn header(&mut self, k: &str, v: &str) {
        info::push(&mut self.info, k.as_bytes(), v.as_bytes());
    }

    fn text(status: u16, text: String) -> Reply {
        let mut r = Reply::new(status, text.into());
        r.header("content-type", "text/plain; charset=utf-8");
        r
    }

    pub fn refusal(r: &Refusal) -> Reply {
        let mut reply = Reply::text(r.status(), r.message());
        if let Refusal::MethodNotAllowed(_) = r {
            reply.header("allow", "GET, HEAD");
        }
        reply
    }
}

pub async fn reply(source: Source, method: Method, c: &Conditions, s: &Settings) -> Reply {
    let entry = match &source {
        Source::Memory(e) => e.clone(),
        Source::Disk { entry, .. } => entry.clone(),
    };
    let size = entry.meta.size;
    let with_validators = |r: &mut Reply| {
        r.header("etag", &entry.etag);
        r.header("last-modified", &entry.last_modified);
    };
    if c.not_modified(&entry.etag, entry.meta.modified) {
        let mut r = Reply::new(304, Bytes::new());
        with_validators(&mut r);
        return r;
    }
    let (status, start, len) = match c.range(&entry.etag, &entry.last_modified, size) {
        Ranged::Whole => (200, 0, size),
        Ranged::Part { start, end } => (206, start, end - start + 1),
        Ranged::Unsatisfiable => {
            let mut r = Reply::text(416, format!("range not satisfiable: the file has {size} bytes\n"));
            r.header("content-range", &format!("bytes */{size}"));
            return r;
        }
    };
    let head = |mut r: Reply| {
        r.header("content-type", &entry.content_type);
        with_validators(&mut r);
        r.header("accept-ranges", "bytes");
        if status == 206 {
            r.header("content-range", &format!("bytes {start}-{}/{size}", start + len - 1));
        }
        r
    };
    match source {
        Source::Memory(e) => {
            // The body even for HEAD through the gateway: it sets the
            // Content-Length from it and sends no body. Other callers get
            // the length as a key.
            if method == Method::Head && !c.can_stream {
                let mut r = head(Reply::new(status, Bytes::new()));
                r.header("content-length", &len.to_string());
                return r;
            }
            let bytes = e.body.slice(start as usize..(start + len) as usize);
            // Through the gateway, large bytes skip the trip through the
            // core (a copy into its answer): the gateway takes them as they
            // are. When the table is full they go in the answer.
            if c.can_stream && bytes.len() >= stream::MEMORY_MIN {
                if let Some(handle) = stream::put(stream::Part::Memory(bytes.clone())) {
                    let mut r = head(Reply::new(status, Bytes::new()));
                    r.header(stream::HANDLE_KEY, &handle);
                    return r;
                }
            }
            head(Reply::new(status, bytes))
        }
        Source::Disk { file, .. } => {
            if c.can_stream {
                let part = stream::FilePart { file, offset: start, len };
                match stream::put(stream::Part::File(part)) {
                    Some(handle) => {
                        let mut r = head(Reply::new(status, Bytes::new()));
                        r.header(stream::HANDLE_KEY, &handle);
                        return r;
                    }
                    None => {
                        return Reply::text(
                            503,
                            format!(
                                "service unavailable: {} large files are being sent; try again\n",
                                stream::MAX_HANDLES
                            ),
                        )
                    }
                }
            }
            if method == Method::Head {
                let mut r = head(Reply::new(status, Bytes::new()));
                r.header("content-length", &len.to_string());
                return r;
            }
            if len > s.max_answer {
                return Reply::text(
                    413,
                    format!(
                        "content too large: {len} bytes is over this service's max_answer ({} bytes); ask for a part with a Range of at most that many bytes\n",
                        s.max_answer
                    ),
                );
            }
            match tokio::task::spawn_blocking(move || super::lookup::read_part(&file, start, len)).await {
                Ok(Ok(bytes)) => head(Reply::new(status, bytes.into())),
                _ => Reply::text(500, "internal server error: the file could not be read\n".into()),
            }
        }
    }
}
