//! The one error type of the crate.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why an operation on the log failed.
#[derive(Debug)]
pub enum WalError {
    /// The append would take the segment files past `Options::max_bytes`.
    /// Answered at once, before anything is written; free space with
    /// `Log::remove_through` and try again.
    Full {
        /// Bytes of segment files plus bytes already queued for writing.
        used: u64,
        /// `Options::max_bytes`.
        limit: u64,
        /// Bytes this append would add (payloads plus their 8-byte frames).
        needed: u64,
    },
    /// One record is longer than `Options::max_record`.
    TooLarge {
        /// The record's length in bytes.
        len: u64,
        /// The largest record the log accepts.
        max: u64,
    },
    /// A file system call failed.
    Io {
        /// The file or directory it was about.
        path: PathBuf,
        /// What was being done, e.g. "write", "fdatasync", "create directory".
        op: &'static str,
        /// The operating system's error (ENOSPC, EIO, EACCES, ...).
        source: io::Error,
    },
    /// Another `Log` (in this or another process) holds the directory.
    InUse {
        /// The lock file that is held.
        path: PathBuf,
    },
    /// The log was closed (or its writer thread ended) before the operation
    /// could be done.
    Closed,
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> Self {
        WalError::Io { path: path.into(), op, source }
    }

    /// A copy for each of the futures a failed batch completes (`io::Error` is
    /// not `Clone`; the OS error code, which callers match on, is kept).
    pub(crate) fn duplicate(&self) -> WalError {
        match self {
            WalError::Full { used, limit, needed } => WalError::Full { used: *used, limit: *limit, needed: *needed },
            WalError::TooLarge { len, max } => WalError::TooLarge { len: *len, max: *max },
            WalError::Io { path, op, source } => WalError::Io { path: path.clone(), op, source: copy_io(source) },
            WalError::InUse { path } => WalError::InUse { path: path.clone() },
            WalError::Closed => WalError::Closed,
        }
    }

    /// The OS error kind when this is an I/O error.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            WalError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

pub(crate) fn copy_io(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalError::Full { used, limit, needed } => write!(
                f,
                "write-ahead log full: {used} of {limit} bytes in use, the append needs {needed} more; remove old segments first"
            ),
            WalError::TooLarge { len, max } => {
                write!(f, "record of {len} bytes is larger than the write-ahead log's maximum of {max} bytes")
            }
            WalError::Io { path, op, source } => {
                write!(f, "write-ahead log: {op} {}: {source}", path.display())
            }
            WalError::InUse { path } => write!(
                f,
                "write-ahead log directory is in use by another process or Log (lock {} is held)",
                path.display()
            ),
            WalError::Closed => write!(f, "write-ahead log is closed"),
        }
    }
}

impl std::error::Error for WalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
