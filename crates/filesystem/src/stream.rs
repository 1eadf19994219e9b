//! Large answers reach HTTP clients without being copied through the core:
//! the filesystem service leaves what it serves here under a random id,
//! answers the gateway with that id in `response_info`
//! (`cumulo-file-handle`), and the gateway of the same process takes it and
//! makes it the response body. A service message carries the id, never the
//! bytes. What is left here is either
//! - an open file (over `cache_file_max`, never read whole), which the
//!   gateway sends in chunks of `CHUNK` bytes as the client reads them; or
//! - bytes of the memory cache (a file or range of at least `MEMORY_MIN`
//!   bytes), shared with the cache by reference count, which hyper writes
//!   from where they are: a cached 1 MiB file costs no copy of 1 MiB.
//!
//! The filesystem service answers with a handle only when the request's
//! sender is an HTTP gateway of this core (the core marks its instance;
//! a forward keeps the sender), so a gateway on another node, or any other
//! caller, gets the bytes in the answer instead. Nothing is added to the
//! request_info: services see exactly what the HTTP request says.
//! The table is bounded (`MAX_HANDLES` entries, of which `MAX_MEMORY` bytes
//! of memory ones) and a handle nobody took within `HANDLE_TTL` is dropped.

use bytes::Bytes;
use std::collections::HashMap;
use std::fs::File;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The response_info key that names a handle.
pub const HANDLE_KEY: &str = "cumulo-file-handle";
/// Bytes read and sent at a time: the memory one streaming response holds.
pub const CHUNK: usize = 64 * 1024;
/// Open files waiting for their gateway, at most: each holds a descriptor.
pub const MAX_HANDLES: usize = 1024;
/// A handle not taken by then is dropped (its request timed out).
pub const HANDLE_TTL: Duration = Duration::from_secs(60);
/// Memory answers smaller than this go in the answer: copying a few KiB
/// costs less than the handle's round trip through the table.
pub const MEMORY_MIN: usize = 16 * 1024;
/// Bytes of memory parts waiting, at most: a part normally shares its bytes
/// with the cache, but keeps them alive if the cache drops the file before
/// the gateway takes it. Over this the bytes go in the answer.
pub const MAX_MEMORY: u64 = 256 << 20;

/// An open file and the bytes of it to send.
pub struct FilePart {
    pub file: File,
    pub offset: u64,
    pub len: u64,
}

/// What a handle names.
pub enum Part {
    File(FilePart),
    /// Bytes to send as they are (shared, not copied).
    Memory(Bytes),
}

impl Part {
    fn memory(&self) -> u64 {
        match self {
            Part::File(_) => 0,
            Part::Memory(b) => b.len() as u64,
        }
    }
}

struct Table {
    next_sweep: Instant,
    open: HashMap<u64, (Instant, Part)>,
    /// Bytes of the memory parts in `open`.
    memory: u64,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(Table { next_sweep: Instant::now(), open: HashMap::new(), memory: 0 }))
}

/// Leaves `part` for the gateway; None when `MAX_HANDLES` are waiting, or
/// a memory part would take the memory parts over `MAX_MEMORY`.
pub fn put(part: Part) -> Option<String> {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let t = &mut *t;
    let now = Instant::now();
    let memory = part.memory();
    if now >= t.next_sweep || t.open.len() >= MAX_HANDLES || t.memory + memory > MAX_MEMORY {
        let freed = &mut t.memory;
        t.open.retain(|_, (at, part)| {
            let keep = now.duration_since(*at) < HANDLE_TTL;
            if !keep {
                *freed -= part.memory();
            }
            keep
        });
        t.next_sweep = now + Duration::from_secs(1);
    }
    if t.open.len() >= MAX_HANDLES || t.memory + memory > MAX_MEMORY {
        return None;
    }
    let id = loop {
        let id = fastrand::u64(1..);
        if !t.open.contains_key(&id) {
            break id;
        }
    };
    t.memory += memory;
    t.open.insert(id, (now, part));
    Some(format!("{id:x}"))
}

/// Takes the part a handle names (once).
pub fn take(handle: &[u8]) -> Option<Part> {
    let id = u64::from_str_radix(std::str::from_utf8(handle).ok()?, 16).ok()?;
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let (_, part) = t.open.remove(&id)?;
    t.memory -= part.memory();
    Some(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_taken_once() {
        let path = std::env::temp_dir().join(format!("cumulo-handle-{}", std::process::id()));
        std::fs::write(&path, b"0123456789").unwrap();
        let part = FilePart { file: File::open(&path).unwrap(), offset: 2, len: 5 };
        let id = put(Part::File(part)).unwrap();
        let Some(Part::File(part)) = take(id.as_bytes()) else { panic!("not the file part") };
        assert_eq!((part.offset, part.len), (2, 5));
        assert!(take(id.as_bytes()).is_none());
        assert!(take(b"zz").is_none());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_memory_part_is_the_same_bytes_not_a_copy() {
        let cached = Bytes::from(vec![7u8; 100_000]);
        let sent = cached.slice(1000..);
        let id = put(Part::Memory(sent.clone())).unwrap();
        let Some(Part::Memory(got)) = take(id.as_bytes()) else { panic!("not the memory part") };
        assert_eq!(got.as_ptr(), cached[1000..].as_ptr());
        assert_eq!(got.len(), 99_000);
    }

    #[test]
    fn memory_parts_are_bounded_in_bytes() {
        // Zeroed memory the test never touches: the system maps it lazily.
        let over = Bytes::from(vec![0u8; MAX_MEMORY as usize + 1]);
        assert!(put(Part::Memory(over)).is_none());
        let fits = Bytes::from(vec![0u8; MEMORY_MIN]);
        let id = put(Part::Memory(fits)).unwrap();
        assert!(matches!(take(id.as_bytes()), Some(Part::Memory(b)) if b.len() == MEMORY_MIN));
    }
}
