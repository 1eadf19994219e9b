//! Files kept in memory: at most `cache_size` bytes in all (each file at
//! most `cache_file_max`), the least recently used dropped first. An entry
//! is served without touching the disk until it is `refresh` old; then the
//! file is looked at again (size and modification time) and re-read only
//! if it changed.

use super::lookup::Meta;
use bytes::Bytes;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A file as served: its headers, and its bytes when it is kept in memory.
pub struct Entry {
    pub meta: Meta,
    pub etag: String,
    pub last_modified: String,
    pub content_type: String,
    pub body: Bytes,
}

impl Entry {
    pub fn new(meta: Meta, body: Bytes) -> Entry {
        Entry {
            etag: meta.etag(),
            last_modified: httpdate::fmt_http_date(meta.modified),
            content_type: super::lookup::content_type(&meta.name),
            meta,
            body,
        }
    }

    fn cost(&self, key: &str) -> u64 {
        // the bytes, and roughly what the entry's strings hold
        (self.body.len() + key.len() + self.meta.name.len() + 128) as u64
    }
}

struct Slot {
    entry: Rc<Entry>,
    checked: Instant,
    used: u64,
}

pub struct Cache {
    entries: HashMap<String, Slot>,
    bytes: u64,
    limit: u64,
    refresh: Duration,
    tick: u64,
}

impl Cache {
    pub fn new(limit: u64, refresh: Duration) -> Cache {
        Cache { entries: HashMap::new(), bytes: 0, limit, refresh, tick: 0 }
    }

    /// A fresh entry (checked less than `refresh` ago).
    pub fn fresh(&mut self, key: &str, now: Instant) -> Option<Rc<Entry>> {
        self.tick += 1;
        let tick = self.tick;
        let s = self.entries.get_mut(key)?;
        if now.saturating_duration_since(s.checked) >= self.refresh {
            return None;
        }
        s.used = tick;
        Some(s.entry.clone())
    }

    /// What is known of a stale entry, to ask the disk whether it changed.
    pub fn known(&self, key: &str) -> Option<Meta> {
        self.entries.get(key).map(|s| s.entry.meta.clone())
    }

    /// The file did not change: serve the entry for another `refresh`.
    pub fn confirm(&mut self, key: &str, now: Instant) -> Option<Rc<Entry>> {
        let s = self.entries.get_mut(key)?;
        s.checked = now;
        Some(s.entry.clone())
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(s) = self.entries.remove(key) {
            self.bytes -= s.entry.cost(key);
        }
    }

    /// Keeps `entry` if it fits, dropping the least recently used. The
    /// scan for the oldest is linear: eviction happens once per file read
    /// from disk, which costs far more.
    pub fn insert(&mut self, key: String, entry: Rc<Entry>) {
        self.remove(&key);
        let cost = entry.cost(&key);
        if cost > self.limit {
            return;
        }
        while self.bytes + cost > self.limit {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone()) else { break };
            self.remove(&oldest);
        }
        self.tick += 1;
        self.bytes += cost;
        self.entries.insert(key, Slot { entry, checked: Instant::now(), used: self.tick });
    }

    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn entry(size: usize, _now: Instant) -> Rc<Entry> {
        let meta = Meta { size: size as u64, modified: SystemTime::UNIX_EPOCH, name: "f".into() };
        Rc::new(Entry::new(meta, Bytes::from(vec![0; size])))
    }

    #[test]
    fn bounded_in_bytes_least_recently_used_first() {
        let now = Instant::now();
        let mut c = Cache::new(3000, Duration::from_secs(10));
        c.insert("a".into(), entry(1000, now));
        c.insert("b".into(), entry(1000, now));
        assert!(c.fresh("a", now).is_some());
        c.insert("c".into(), entry(1000, now));
        assert!(c.bytes() <= 3000);
        assert!(c.fresh("b", now).is_none(), "b was the least recently used");
        assert!(c.fresh("a", now).is_some() && c.fresh("c", now).is_some());
        c.insert("huge".into(), entry(5000, now));
        assert!(c.fresh("huge", now).is_none() && c.bytes() <= 3000);
    }

    #[test]
    fn entries_go_stale_after_refresh() {
        let now = Instant::now();
        let mut c = Cache::new(1 << 20, Duration::from_millis(100));
        c.insert("a".into(), entry(10, now));
        let later = Instant::now() + Duration::from_millis(150);
        assert!(c.fresh("a", later).is_none());
        assert!(c.known("a").is_some());
        assert!(c.confirm("a", later).is_some());
        assert!(c.fresh("a", later).is_some());
    }
}
