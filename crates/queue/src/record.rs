//! What the queue writes to its log: one record per event, each decoded on
//! recovery in log order. A record's bytes are its kind, then its fields
//! (integers little-endian, byte strings with a u32 length). The log adds a
//! length and a checksum around each (cumulo-wal).
//!
//! - `Put`: a request, whole, with its state (pending or dead, attempts and
//!   history so far). Written when it arrives, and again when compaction
//!   moves it to a newer segment; the later copy wins.
//! - `Started`: attempt `n` began (so an attempt cut short by a crash still
//!   counts towards `max_deliveries`).
//! - `Failed`: attempt `n` ended with a retryable status.
//! - `Dead`: out of attempts or time: kept as a dead letter.
//! - `Revive`: a dead letter replayed: pending again, attempts from 0.
//! - `Done`: answered, dropped or purged: forgotten.

use std::rc::Rc;

/// One attempt that failed: when, and with which status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub attempt: u32,
    pub at_ms: u64,
    pub status: u16,
}

/// A stored request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub id: u64,
    /// When it arrived (Unix ms).
    pub arrived_ms: u64,
    /// Its deadline (Unix ms), 0 for none.
    pub expires_ms: u64,
    /// Each attempt's timeout.
    pub timeout_ms: u32,
    pub priority: i8,
    pub dead: bool,
    pub attempts: u32,
    pub history: Vec<Failure>,
    pub destination: String,
    pub reply_to: String,
    pub idempotency_key: String,
    /// Shared, not copied, by each attempt (`Store::start_next`).
    pub request_info: Rc<[u8]>,
    pub request: Rc<[u8]>,
}

impl Stored {
    /// Bytes this request costs in memory and on disk, roughly.
    pub fn size(&self) -> usize {
        64 + self.destination.len()
            + self.reply_to.len()
            + self.idempotency_key.len()
            + self.request_info.len()
            + self.request.len()
            + self.history.len() * 16
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Put(Stored),
    Started { id: u64, attempt: u32 },
    Failed { id: u64, failure: Failure },
    Dead { id: u64 },
    Revive { id: u64 },
    Done { id: u64 },
}

const PUT: u8 = 1;
const STARTED: u8 = 2;
const FAILED: u8 = 3;
const DEAD: u8 = 4;
const REVIVE: u8 = 5;
const DONE: u8 = 6;

impl Record {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        match self {
            Record::Put(s) => return encode_put(s),
            Record::Started { id, attempt } => {
                w.u8(STARTED);
                w.u64(*id);
                w.u32(*attempt);
            }
            Record::Failed { id, failure } => {
                w.u8(FAILED);
                w.u64(*id);
                w.failure(failure);
            }
            Record::Dead { id } => {
                w.u8(DEAD);
                w.u64(*id);
            }
            Record::Revive { id } => {
                w.u8(REVIVE);
                w.u64(*id);
            }
            Record::Done { id } => {
                w.u8(DONE);
                w.u64(*id);
            }
        }
        w.0
    }

    /// Decodes one record; `None` for bytes no version of the queue wrote
    /// (the log's checksum passed, so this is a bug or a foreign file).
    pub fn decode(b: &[u8]) -> Option<Record> {
        let mut r = Reader(b);
        let rec = match r.u8()? {
            PUT => {
                let id = r.u64()?;
                let arrived_ms = r.u64()?;
                let expires_ms = r.u64()?;
                let timeout_ms = r.u32()?;
                let priority = r.u8()? as i8;
                let dead = r.u8()? != 0;
                let attempts = r.u32()?;
                let n = r.u32()? as usize;
                if n > r.0.len() / 16 {
                    return None;
                }
                let mut history = Vec::with_capacity(n);
                for _ in 0..n {
                    history.push(r.failure()?);
                }
                let destination = r.string()?;
                let reply_to = r.string()?;
                let idempotency_key = r.string()?;
                let request_info = Rc::from(r.bytes()?);
                let request = Rc::from(r.bytes()?);
                Record::Put(Stored {
                    id,
                    arrived_ms,
                    expires_ms,
                    timeout_ms,
                    priority,
                    dead,
                    attempts,
                    history,
                    destination,
                    reply_to,
                    idempotency_key,
                    request_info,
                    request,
                })
            }
            STARTED => Record::Started { id: r.u64()?, attempt: r.u32()? },
            FAILED => Record::Failed { id: r.u64()?, failure: r.failure()? },
            DEAD => Record::Dead { id: r.u64()? },
            REVIVE => Record::Revive { id: r.u64()? },
            DONE => Record::Done { id: r.u64()? },
            _ => return None,
        };
        r.0.is_empty().then_some(rec)
    }
}

/// A `Put` of `s`, encoded without copying `s` first.
pub fn encode_put(s: &Stored) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(s.size() + 16));
    w.u8(PUT);
    w.u64(s.id);
    w.u64(s.arrived_ms);
    w.u64(s.expires_ms);
    w.u32(s.timeout_ms);
    w.u8(s.priority as u8);
    w.u8(s.dead as u8);
    w.u32(s.attempts);
    w.u32(s.history.len() as u32);
    for f in &s.history {
        w.failure(f);
    }
    w.bytes(s.destination.as_bytes());
    w.bytes(s.reply_to.as_bytes());
    w.bytes(s.idempotency_key.as_bytes());
    w.bytes(&s.request_info);
    w.bytes(&s.request);
    w.0
}

/// The queue's binary layout, one field at a time: integers little-endian,
/// byte strings with a u32 length. Both backends write their records with
/// it.
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
    /// Bytes without a length: the last field of a record.
    pub fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn failure(&mut self, f: &Failure) {
        self.u32(f.attempt);
        self.u64(f.at_ms);
        self.u16(f.status);
    }
}

/// Reads what [`Writer`] wrote; `None` past the end.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// A UTF-8 string written with [`Writer::bytes`].
    pub fn string(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?.to_vec()).ok()
    }
    /// Everything left: the last field of a record.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
    fn failure(&mut self) -> Option<Failure> {
        Some(Failure { attempt: self.u32()?, at_ms: self.u64()?, status: self.u16()? })
    }
}
