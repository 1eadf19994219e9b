//! Segment files: naming, the header, listing, creation, and directory fsync.
//!
//! A segment is `{segment:020}.wal` and starts with a 24-byte header:
//! `[magic: 8 bytes "CUMULOWL"][version: u32 LE][segment: u64 LE][crc32 of the previous 20 bytes: u32 LE]`.
//! The segment number in the header must match the file name, so a file
//! copied or renamed by hand is not read as another segment's records.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::WalError;

pub(crate) const MAGIC: [u8; 8] = *b"CUMULOWL";
pub(crate) const VERSION: u32 = 1;
pub(crate) const HEADER_LEN: u64 = 24;
const SUFFIX: &str = ".wal";

pub(crate) fn path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:020}{SUFFIX}"))
}

/// The segment number of a file name written by [`path`], or `None` for any
/// other file (those are left alone).
fn parse_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The segment numbers in `dir` with their file sizes, ascending.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, u64)>, WalError> {
    let entries = fs::read_dir(dir).map_err(|e| WalError::io(dir, "list directory", e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| WalError::io(dir, "list directory", e))?;
        let Some(segment) = entry.file_name().to_str().and_then(parse_name) else {
            continue;
        };
        let meta = entry.metadata().map_err(|e| WalError::io(entry.path(), "stat", e))?;
        if meta.is_file() {
            found.push((segment, meta.len()));
        }
    }
    found.sort_unstable();
    Ok(found)
}

pub(crate) fn header(segment: u64) -> [u8; HEADER_LEN as usize] {
    let mut h = [0u8; HEADER_LEN as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&segment.to_le_bytes());
    let crc = crc32fast::hash(&h[..20]);
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What is wrong with a header, or `None` when it is the header of `segment`.
pub(crate) fn check_header(h: &[u8; HEADER_LEN as usize], segment: u64) -> Option<&'static str> {
    if h[..8] != MAGIC {
        return Some("wrong magic");
    }
    if crc32fast::hash(&h[..20]).to_le_bytes() != h[20..24] {
        return Some("header checksum mismatch");
    }
    if h[8..12] != VERSION.to_le_bytes() {
        return Some("unsupported version");
    }
    if h[12..20] != segment.to_le_bytes() {
        return Some("segment number differs from the file name");
    }
    None
}

/// The segment being written.
pub(crate) struct Active {
    pub(crate) segment: u64,
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    /// Bytes in the file that belong to completed writes.
    pub(crate) len: u64,
    /// `len` at the last successful fdatasync.
    pub(crate) synced_len: u64,
    /// After a failed fdatasync the kernel may have dropped dirty pages and
    /// marked them clean, so later syncs of this file prove nothing; the next
    /// write goes to a new segment instead.
    pub(crate) poisoned: bool,
}

impl Active {
    pub(crate) fn has_records(&self) -> bool {
        self.len > HEADER_LEN
    }

    pub(crate) fn dirty(&self) -> bool {
        self.len != self.synced_len
    }
}

/// Creates segment `segment`: header written and synced, directory synced,
/// so the file and its header survive a crash before its first record is
/// acknowledged. On failure the half-made file is removed (best effort).
pub(crate) fn create(dir: &Path, segment: u64) -> Result<Active, WalError> {
    let path = path(dir, segment);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| WalError::io(&path, "create segment", e))?;
    let written = (&file)
        .write_all(&header(segment))
        .map_err(|e| WalError::io(&path, "write segment header", e))
        .and_then(|()| file.sync_data().map_err(|e| WalError::io(&path, "fdatasync", e)))
        .and_then(|()| sync_dir(dir));
    if let Err(e) = written {
        drop(file);
        let _ = fs::remove_file(&path);
        return Err(e);
    }
    Ok(Active { segment, path, file, len: HEADER_LEN, synced_len: HEADER_LEN, poisoned: false })
}

/// An existing segment as the active one when no new one can be created:
/// poisoned, so the writer writes nothing to it and starts a new segment
/// (retrying the create) before the next append.
pub(crate) fn stand_in(dir: &Path, segment: u64) -> Result<Active, WalError> {
    let path = path(dir, segment);
    let file =
        OpenOptions::new().read(true).write(true).open(&path).map_err(|e| WalError::io(&path, "open segment", e))?;
    let len = file.metadata().map_err(|e| WalError::io(&path, "stat segment", e))?.len();
    Ok(Active { segment, path, file, len, synced_len: len, poisoned: true })
}

/// fsync of the directory, which makes a created or removed name durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| WalError::io(dir, "fsync directory", e))
}

/// Removes a segment file; one that is already gone counts as removed.
pub(crate) fn remove(dir: &Path, segment: u64) -> Result<(), WalError> {
    let p = path(dir, segment);
    match fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WalError::io(p, "remove segment", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_header() {
        let p = path(Path::new("/d"), 42);
        assert_eq!(p, Path::new("/d/00000000000000000042.wal"));
        assert_eq!(parse_name("00000000000000000042.wal"), Some(42));
        assert_eq!(parse_name("42.wal"), None);
        assert_eq!(parse_name("00000000000000000042.wal.tmp"), None);
        assert_eq!(parse_name("LOCK"), None);

        let h = header(7);
        assert_eq!(check_header(&h, 7), None);
        assert_eq!(check_header(&h, 8), Some("segment number differs from the file name"));
        let mut bad = h;
        bad[0] = b'X';
        assert_eq!(check_header(&bad, 7), Some("wrong magic"));
        let mut bad = h;
        bad[13] ^= 1;
        assert_eq!(check_header(&bad, 7), Some("header checksum mismatch"));
    }
}
