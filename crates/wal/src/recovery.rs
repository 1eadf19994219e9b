//! Reading the existing segments at open.
//!
//! Each segment is read on its own from its header on. Reading a segment
//! stops at its first bad record: a torn one (the file ends inside it), one
//! whose checksum fails, or one with an impossible length. Everything from
//! there to the end of that file is reported in [`Recovery::dropped`] and
//! never read again; the next segment is read as usual, because segments are
//! independent (each was synced before the next one got records).
//!
//! The file is left as it is, not truncated: it is read-only from now on (a
//! new active segment is always started at open), the bad bytes stay
//! available for a post-mortem, and the segment is deleted by
//! `Log::remove_through` like any other once the caller no longer needs
//! the records before the bad point. Reopening reports it again.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::WalError;
use crate::record::{Frame, FRAME_LEN, MAX_PAYLOAD};
use crate::segment::{self, HEADER_LEN};
use crate::Position;

/// What `Log::open` found in the existing segments.
#[derive(Debug, Default)]
pub struct Recovery {
    records: Vec<(Position, Vec<u8>)>,
    dropped: Vec<Dropped>,
}

impl Recovery {
    /// The good records, in log order (segment, then offset).
    pub fn records(&self) -> &[(Position, Vec<u8>)] {
        &self.records
    }

    /// Takes the records out, in log order.
    pub fn into_records(self) -> Vec<(Position, Vec<u8>)> {
        self.records
    }

    /// The bytes that were not read back, one entry per affected segment.
    pub fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// Both parts at once.
    pub fn into_parts(self) -> (Vec<(Position, Vec<u8>)>, Vec<Dropped>) {
        (self.records, self.dropped)
    }

    /// True when every byte of every segment was read back as records.
    pub fn is_clean(&self) -> bool {
        self.dropped.is_empty()
    }
}

/// The unread rest of one segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    path: PathBuf,
    segment: u64,
    offset: u64,
    bytes: u64,
    reason: DropReason,
}

impl Dropped {
    /// The segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its segment number.
    pub fn segment(&self) -> u64 {
        self.segment
    }

    /// Where the first unread byte is (0 for a bad header).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// How many bytes, from `offset` to the end of the file, were not read.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Why reading stopped.
    pub fn reason(&self) -> &DropReason {
        &self.reason
    }
}

impl fmt::Display for Dropped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} bytes from offset {} dropped: {}", self.path.display(), self.bytes, self.offset, self.reason)
    }
}

/// Why the rest of a segment was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// The file ends inside a record: a write that a crash cut short.
    TornTail,
    /// A record's checksum does not match its length and payload.
    BadChecksum,
    /// A record's length is above what the format allows.
    BadLength(u64),
    /// The segment header is missing, short, or wrong; the whole file is dropped.
    BadHeader(&'static str),
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::TornTail => write!(f, "torn tail (the file ends inside a record)"),
            DropReason::BadChecksum => write!(f, "bad checksum"),
            DropReason::BadLength(len) => write!(f, "impossible record length {len}"),
            DropReason::BadHeader(why) => write!(f, "bad segment header: {why}"),
        }
    }
}

/// Reads the given segments (ascending) of `dir`.
pub(crate) fn recover(dir: &Path, segments: &[(u64, u64)]) -> Result<Recovery, WalError> {
    let mut out = Recovery::default();
    for &(segment, _) in segments {
        let path = segment::path(dir, segment);
        read_segment(&path, segment, &mut out).map_err(|e| WalError::io(&path, "read segment", e))?;
    }
    Ok(out)
}

fn read_segment(path: &Path, segment: u64, out: &mut Recovery) -> io::Result<()> {
    let file = File::open(path)?;
    // The length is taken once: the file is not written while we read it
    // (the directory lock is held and old segments are never appended to).
    let file_len = file.metadata()?.len();
    let mut r = BufReader::with_capacity(256 * 1024, file);
    let mut drop_rest = |offset: u64, reason: DropReason| {
        out.dropped.push(Dropped { path: path.to_owned(), segment, offset, bytes: file_len - offset, reason });
    };

    if file_len < HEADER_LEN {
        drop_rest(0, DropReason::BadHeader("file shorter than a header"));
        return Ok(());
    }
    let mut header = [0u8; HEADER_LEN as usize];
    r.read_exact(&mut header)?;
    if let Some(why) = segment::check_header(&header, segment) {
        drop_rest(0, DropReason::BadHeader(why));
        return Ok(());
    }

    let mut records = Vec::new();
    let mut offset = HEADER_LEN;
    let stop = loop {
        let left = file_len - offset;
        if left == 0 {
            break None;
        }
        if left < FRAME_LEN {
            break Some(DropReason::TornTail);
        }
        let mut fb = [0u8; FRAME_LEN as usize];
        r.read_exact(&mut fb)?;
        let frame = Frame::parse(fb);
        if frame.len > MAX_PAYLOAD {
            break Some(DropReason::BadLength(frame.len));
        }
        // Checked before allocating, so a corrupt length cannot ask for more
        // memory than the file holds.
        if frame.len > left - FRAME_LEN {
            break Some(DropReason::TornTail);
        }
        let mut payload = vec![0u8; frame.len as usize];
        r.read_exact(&mut payload)?;
        if !frame.matches(&payload) {
            break Some(DropReason::BadChecksum);
        }
        records.push((Position::new(segment, offset), payload));
        offset += FRAME_LEN + frame.len;
    };
    if let Some(reason) = stop {
        drop_rest(offset, reason);
    }
    out.records.append(&mut records);
    Ok(())
}
