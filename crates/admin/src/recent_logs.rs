//! The last log lines, kept in memory for `GET /v1/logs` (the dashboard's
//! live log): a `tracing` layer behind the log filter, so it holds what the
//! log shows at the current level. Bounded in count (`MAX_LINES`) and bytes
//! (`MAX_BYTES`, each message cut at `MAX_LINE`); the oldest go first. Each
//! line has a sequence number, so a reader asks for what came after the last
//! one it saw and learns how many it missed.

use serde::Serialize;
use std::collections::VecDeque;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Lines kept, at most.
pub const MAX_LINES: usize = 2000;
/// Bytes of messages kept, at most.
pub const MAX_BYTES: usize = 1024 * 1024;
/// A longer message is cut (a service may print anything).
pub const MAX_LINE: usize = 4096;
/// Lines one `GET /v1/logs` returns, at most.
pub const MAX_PER_CALL: usize = 500;

#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    pub level: &'static str,
    pub target: String,
    pub message: String,
}

#[derive(Default)]
struct Ring {
    lines: VecDeque<Line>,
    bytes: usize,
    next_seq: u64,
}

fn ring() -> &'static Mutex<Ring> {
    static RING: OnceLock<Mutex<Ring>> = OnceLock::new();
    RING.get_or_init(|| Mutex::new(Ring { next_seq: 1, ..Default::default() }))
}

fn cost(l: &Line) -> usize {
    l.message.len() + l.target.len() + 64
}

pub fn push(level: &'static str, target: &str, message: String, time_ms: u64) {
    let mut r = ring().lock().unwrap_or_else(|e| e.into_inner());
    let line = Line { seq: r.next_seq, time_ms, level, target: target.to_string(), message };
    r.next_seq += 1;
    r.bytes += cost(&line);
    r.lines.push_back(line);
    while r.lines.len() > MAX_LINES || r.bytes > MAX_BYTES {
        let Some(old) = r.lines.pop_front() else { break };
        r.bytes -= cost(&old);
    }
}

/// Lines after `after` (at most `MAX_PER_CALL`, the oldest first), the
/// sequence number of the last line written, and how many lines after
/// `after` are no longer kept.
pub fn since(after: u64) -> (Vec<Line>, u64, u64) {
    let r = ring().lock().unwrap_or_else(|e| e.into_inner());
    let last = r.next_seq - 1;
    let first_kept = r.lines.front().map_or(r.next_seq, |l| l.seq);
    let missed = first_kept.saturating_sub(after.saturating_add(1));
    let lines = r.lines.iter().filter(|l| l.seq > after).take(MAX_PER_CALL).cloned().collect();
    (lines, last, missed)
}

/// The layer to install behind the log filter.
pub fn layer() -> RecentLogs {
    RecentLogs
}

pub struct RecentLogs;

impl<S: Subscriber> Layer<S> for RecentLogs {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        let mut message = text.message;
        if !text.fields.is_empty() {
            if !message.is_empty() {
                message.push(' ');
            }
            message.push_str(&text.fields);
        }
        cut(&mut message, MAX_LINE);
        let time_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        push(level_name(meta.level()), meta.target(), message, time_ms);
    }
}

fn level_name(l: &tracing::Level) -> &'static str {
    match *l {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warn",
        tracing::Level::INFO => "info",
        tracing::Level::DEBUG => "debug",
        tracing::Level::TRACE => "trace",
    }
}

fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut n = max;
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s.truncate(n);
        s.push('…');
    }
}

/// The message, then the other fields as `key=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            if !self.fields.is_empty() {
                self.fields.push(' ');
            }
            let _ = write!(self.fields, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_read_after_a_sequence_number() {
        let (_, start, _) = since(u64::MAX);
        for i in 0..(MAX_LINES + 10) {
            push("info", "t", format!("line {i}"), 0);
        }
        let (lines, last, missed) = since(start);
        assert_eq!(last, start + (MAX_LINES + 10) as u64);
        assert!(missed >= 10, "{missed}");
        assert_eq!(lines.len(), MAX_PER_CALL);
        let (tail, _, missed) = since(last - 3);
        assert_eq!((tail.len(), missed), (3, 0));
        assert_eq!(tail[2].message, format!("line {}", MAX_LINES + 9));
        push("warn", "t", "x".repeat(MAX_BYTES), 0);
        assert!(ring().lock().unwrap().bytes <= MAX_BYTES);
        let mut s = "é".repeat(10);
        cut(&mut s, 5);
        assert_eq!(s, "éé…");
    }
}
