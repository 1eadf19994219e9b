//! The file system calls, run off the event loop (`spawn_blocking`): find
//! the file a target names, check that it really is under the directory
//! once symbolic links are resolved, and read it when it is small enough to
//! keep in memory.

use super::path::Refusal;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What is known about a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub size: u64,
    pub modified: SystemTime,
    /// The file's name, for its content type.
    pub name: String,
}

impl Meta {
    /// Strong enough for a static file: size and modification time in ns.
    pub fn etag(&self) -> String {
        let ns = self.modified.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        format!("\"{:x}-{:x}\"", self.size, ns)
    }
}

pub enum Found {
    /// Unchanged since `known`: nothing read.
    Unchanged,
    /// Small enough to read whole: read.
    Read(Meta, Vec<u8>),
    /// Larger: left open, to be read in parts.
    Open(Meta, File),
}

/// `root` is canonical. `known` is what the cache holds for this target;
/// files up to `read_max` bytes are read whole.
pub fn find(
    root: &Path,
    segments: &[String],
    index: &str,
    known: Option<&Meta>,
    read_max: u64,
) -> Result<Found, Refusal> {
    let mut path: PathBuf = root.to_path_buf();
    path.extend(segments);
    let mut real = real_path(root, &path)?;
    let mut meta = std::fs::metadata(&real).map_err(|_| not_found())?;
    if meta.is_dir() {
        if index.is_empty() {
            return Err(Refusal::NotFound("a directory, and this service has no index file"));
        }
        real = real_path(root, &real.join(index))?;
        meta = std::fs::metadata(&real).map_err(|_| Refusal::NotFound("a directory without an index file"))?;
    }
    if !meta.is_file() {
        return Err(not_found());
    }
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let now = Meta { size: meta.len(), modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), name };
    if known == Some(&now) {
        return Ok(Found::Unchanged);
    }
    let mut file = File::open(&real).map_err(|_| Refusal::Forbidden("the file cannot be opened"))?;
    if now.size > read_max {
        return Ok(Found::Open(now, file));
    }
    let mut bytes = Vec::with_capacity(now.size as usize);
    // Bounded even if the file grew since its size was read.
    (&mut file).take(read_max).read_to_end(&mut bytes).map_err(|_| Refusal::Forbidden("the file cannot be read"))?;
    let meta = Meta { size: bytes.len() as u64, ..now };
    Ok(Found::Read(meta, bytes))
}

/// Reads `len` bytes at `offset` (a range of a large file, for a caller
/// that takes the bytes in its answer).
pub fn read_part(file: &File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; len as usize];
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], offset + done as u64)?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank"));
        }
        done += n;
    }
    Ok(buf)
}

fn not_found() -> Refusal {
    Refusal::NotFound("no such file")
}

/// The path with every symbolic link resolved, refused unless it is still
/// under `root`.
fn real_path(root: &Path, path: &Path) -> Result<PathBuf, Refusal> {
    let real = path.canonicalize().map_err(|_| not_found())?;
    if !real.starts_with(root) {
        return Err(Refusal::Forbidden("a symbolic link that leads out of the directory"));
    }
    Ok(real)
}

/// The content type of a file name, from its extension.
pub fn content_type(name: &str) -> String {
    let guess = mime_guess::from_path(name).first_or_octet_stream();
    match guess.type_() {
        mime_guess::mime::TEXT => format!("{guess}; charset=utf-8"),
        _ if guess.subtype() == mime_guess::mime::JAVASCRIPT || guess.subtype() == mime_guess::mime::JSON => {
            format!("{guess}; charset=utf-8")
        }
        _ => guess.to_string(),
    }
}
