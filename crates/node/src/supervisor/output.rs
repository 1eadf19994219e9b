//! A service process's stdout and stderr as log records (docs/ADMIN.md, "Logs").
//!
//! The lines of one traceback are made one record here, in the core, rather
//! than in each SDK: only the core sees the output of every language, and
//! tracebacks come from more places than the SDKs' handler wrappers (an
//! uncaught exception at start-up, a Go panic, a JVM's dying thread), so one
//! rule covers them all.
//!
//! On stderr a record is the lines that reach the core in one read (a
//! traceback is usually written at once: Python's logging, Go's `log`,
//! Ruby's `warn`), and every line after them that starts with a space or a
//! tab (frames written one by one: Java's `\tat`, Node's `    at`), until a
//! line that does not, or until the process has written nothing for
//! [`QUIET`]. stdout stays one record per line: piped, it is often
//! block-buffered, so one read holds unrelated lines.
//!
//! Bounded, whatever the process writes: a record holds at most
//! [`MAX_RECORD_BYTES`] and [`MAX_RECORD_LINES`] (more begins the next
//! record), and a line without a newline is cut at [`MAX_RECORD_BYTES`].

use cumulo_router::ServiceId;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};

pub(super) const MAX_RECORD_BYTES: usize = 64 * 1024;
pub(super) const MAX_RECORD_LINES: usize = 256;
/// How long a record waits for more lines: long enough for the frames a
/// runtime writes one by one, short enough not to delay the log.
pub(super) const QUIET: Duration = Duration::from_millis(50);
const READ_SIZE: usize = 16 * 1024;

/// One log record: its first line, and the lines that continue it.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Record {
    pub first: String,
    /// The other lines, joined with `\n`; empty for a one-line record.
    pub continued: String,
    lines: usize,
}

impl Record {
    fn new(line: String) -> Record {
        Record { first: line, continued: String::new(), lines: 1 }
    }

    fn bytes(&self) -> usize {
        self.first.len() + self.continued.len()
    }

    fn push(&mut self, line: &str) {
        if self.lines > 1 {
            self.continued.push('\n');
        }
        self.continued.push_str(line);
        self.lines += 1;
    }
}

/// Turns the bytes of one stream, read by read, into records.
pub(super) struct Grouper {
    /// stderr: group lines into records; stdout: one record per line.
    group: bool,
    record: Option<Record>,
    /// The start of a line whose newline has not come yet.
    partial: Vec<u8>,
    /// Whether `partial` began after a whole line of the same read, so that
    /// it belongs with that line's record.
    partial_joins: bool,
    /// Lines completed in the current read.
    read_lines: usize,
}

impl Grouper {
    pub(super) fn new(group: bool) -> Grouper {
        Grouper { group, record: None, partial: Vec::new(), partial_joins: false, read_lines: 0 }
    }

    /// Whether a record waits for possible continuation lines.
    pub(super) fn holds_record(&self) -> bool {
        self.record.is_some()
    }

    /// The bytes of one read; records that are complete go to `out`.
    pub(super) fn read(&mut self, mut bytes: &[u8], out: &mut Vec<Record>) {
        self.read_lines = 0;
        while !bytes.is_empty() {
            if self.partial.is_empty() {
                self.partial_joins = self.read_lines > 0;
            }
            let (piece, ended) = match memchr::memchr(b'\n', bytes) {
                Some(i) => (&bytes[..i], true),
                None => (bytes, false),
            };
            bytes = &bytes[piece.len() + usize::from(ended)..];
            self.take(piece, ended, out);
        }
    }

    /// The record waiting for continuation lines, once the process went quiet.
    pub(super) fn flush(&mut self) -> Option<Record> {
        self.record.take()
    }

    /// The end of the stream: the last line, even without its newline.
    pub(super) fn finish(&mut self, out: &mut Vec<Record>) {
        if !self.partial.is_empty() {
            self.line(out);
        }
        out.extend(self.record.take());
    }

    /// Appends to the line being read, cutting it at the bound.
    fn take(&mut self, mut piece: &[u8], ended: bool, out: &mut Vec<Record>) {
        loop {
            let room = MAX_RECORD_BYTES - self.partial.len();
            if piece.len() < room || (ended && piece.len() == room) {
                self.partial.extend_from_slice(piece);
                if ended {
                    self.line(out);
                }
                return;
            }
            self.partial.extend_from_slice(&piece[..room]);
            piece = &piece[room..];
            self.line(out);
        }
    }

    /// A whole line (or a cut one) in `partial`: joins the record or begins one.
    fn line(&mut self, out: &mut Vec<Record>) {
        let mut text = String::from_utf8_lossy(&self.partial).into_owned();
        self.partial.clear();
        if text.ends_with('\r') {
            text.pop();
        }
        let arrived_with = self.partial_joins || self.read_lines > 0;
        self.read_lines += 1;
        self.partial_joins = false;
        if !self.group {
            out.push(Record::new(text));
            return;
        }
        let indented = text.starts_with([' ', '\t']);
        match &mut self.record {
            Some(r)
                if (arrived_with || indented)
                    && r.lines < MAX_RECORD_LINES
                    && r.bytes() + 1 + text.len() <= MAX_RECORD_BYTES =>
            {
                r.push(&text)
            }
            _ => out.extend(self.record.replace(Record::new(text))),
        }
    }
}

/// Whose output a stream is.
pub(super) struct Source {
    pub prefix: Rc<str>,
    pub service_id: ServiceId,
    pub index: u32,
}

impl Source {
    fn log(&self, r: &Record, stderr: bool) {
        let (service, service_id, process) = (&self.prefix, self.service_id, self.index);
        // `continued` is a string field: the text log writes it escaped, on
        // the record's one line; the JSON log keeps its newlines.
        match (stderr, r.continued.is_empty()) {
            (true, true) => tracing::warn!(target: "service", service = %service, service_id, process, "{}", r.first),
            (true, false) => {
                let continued = r.continued.as_str();
                tracing::warn!(target: "service", service = %service, service_id, process, continued, "{}", r.first)
            }
            (false, true) => tracing::info!(target: "service", service = %service, service_id, process, "{}", r.first),
            (false, false) => {
                let continued = r.continued.as_str();
                tracing::info!(target: "service", service = %service, service_id, process, continued, "{}", r.first)
            }
        }
    }
}

/// Logs what a process writes on one stream until it closes: stderr as
/// warnings, grouped into records; stdout as info, one record per line.
pub(super) async fn log_output<R: AsyncRead + Unpin>(stream: R, source: Source, stderr: bool) {
    records(stream, stderr, |r| source.log(&r, stderr)).await
}

/// The records of a stream, each handed to `emit` once complete: when a line
/// that does not continue it comes, after [`QUIET`], or at the end.
async fn records<R: AsyncRead + Unpin>(mut stream: R, group: bool, mut emit: impl FnMut(Record)) {
    let mut grouper = Grouper::new(group);
    let mut buf = vec![0u8; READ_SIZE];
    let mut out = Vec::new();
    loop {
        let read = if grouper.holds_record() {
            tokio::select! {
                read = stream.read(&mut buf) => Some(read),
                _ = tokio::time::sleep(QUIET) => None,
            }
        } else {
            Some(stream.read(&mut buf).await)
        };
        match read {
            None => out.extend(grouper.flush()),
            Some(Ok(0) | Err(_)) => break,
            Some(Ok(n)) => grouper.read(&buf[..n], &mut out),
        }
        out.drain(..).for_each(&mut emit);
    }
    grouper.finish(&mut out);
    out.drain(..).for_each(&mut emit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_reads(group: bool, reads: &[&[u8]]) -> Vec<Record> {
        let mut g = Grouper::new(group);
        let mut out = Vec::new();
        for r in reads {
            g.read(r, &mut out);
        }
        g.finish(&mut out);
        out
    }

    fn texts(rs: &[Record]) -> Vec<String> {
        rs.iter()
            .map(|r| if r.continued.is_empty() { r.first.clone() } else { format!("{}\n{}", r.first, r.continued) })
            .collect()
    }

    const PYTHON: &[u8] = b"handler for /a/boom raised\nTraceback (most recent call last):\n  File \"a.py\", line 3, in boom\n    raise E(\"x\")\nE: x\n";

    #[test]
    fn a_traceback_written_at_once_is_one_record() {
        let rs = group_reads(true, &[b"starting\n", PYTHON, b"ready\n"]);
        assert_eq!(texts(&rs), ["starting", std::str::from_utf8(PYTHON).unwrap().trim_end(), "ready"]);
        assert_eq!(rs[1].first, "handler for /a/boom raised");
    }

    #[test]
    fn indented_lines_written_one_by_one_continue_the_record() {
        let reads: &[&[u8]] = &[
            b"java.lang.IllegalStateException: boom\n",
            b"\tat Faulty.boom(Faulty.java:9)\n",
            b"\tat dev.cumulo.Api.handle(Api.java:360)\n",
            b"next\n",
        ];
        let rs = group_reads(true, reads);
        assert_eq!(
            texts(&rs),
            ["java.lang.IllegalStateException: boom\n\tat Faulty.boom(Faulty.java:9)\n\tat dev.cumulo.Api.handle(Api.java:360)", "next"]
        );
    }

    #[test]
    fn separate_writes_of_plain_lines_stay_separate_records() {
        let rs = group_reads(true, &[b"one\n", b"two\n", b"three"]);
        assert_eq!(texts(&rs), ["one", "two", "three"]);
    }

    #[test]
    fn stdout_is_one_record_per_line_even_in_one_read() {
        let rs = group_reads(false, &[b"a\nb\n  c\r\n"]);
        assert_eq!(texts(&rs), ["a", "b", "  c"]);
    }

    #[test]
    fn a_write_split_across_reads_stays_one_record() {
        let text = std::str::from_utf8(PYTHON).unwrap().trim_end();
        let (head, rest) = text.split_once('\n').unwrap();
        let (frames, last) = rest.rsplit_once('\n').unwrap();
        // Every place the traceback can be cut between two reads (a write
        // over the pipe's atomic size may be): whole, except when the cut
        // falls just before a line that starts at column 0.
        for cut in 1..PYTHON.len() {
            let want: Vec<&str> = if cut == head.len() + 1 {
                vec!["before", head, rest]
            } else if cut == head.len() + 1 + frames.len() + 1 {
                vec!["before", &text[..text.len() - last.len() - 1], last]
            } else {
                vec!["before", text]
            };
            assert_eq!(texts(&group_reads(true, &[b"before\n", &PYTHON[..cut], &PYTHON[cut..]])), want, "cut at {cut}");
        }
    }

    #[test]
    fn records_are_bounded_in_lines_and_bytes() {
        let many: Vec<u8> = (0..1000).flat_map(|i| format!("\tframe {i}\n").into_bytes()).collect();
        let rs = group_reads(true, &[b"head\n", &many]);
        assert!(rs.iter().all(|r| r.lines <= MAX_RECORD_LINES && r.bytes() <= MAX_RECORD_BYTES));
        assert_eq!(rs.iter().map(|r| r.lines).sum::<usize>(), 1001, "no line is lost");
        assert_eq!(rs[0].first, "head");

        // A line that never ends is cut, and nothing of it is lost.
        let endless = vec![b'x'; 3 * MAX_RECORD_BYTES + 10];
        let rs = group_reads(true, &[&endless]);
        assert!(rs.iter().all(|r| r.bytes() <= MAX_RECORD_BYTES), "{}", rs.len());
        assert_eq!(rs.iter().map(|r| r.bytes() + r.lines - 1).sum::<usize>(), endless.len());
    }

    #[test]
    fn invalid_utf8_is_logged_not_the_end_of_the_stream() {
        let rs = group_reads(true, &[b"bad \xff byte\n", b"after\n"]);
        assert_eq!(texts(&rs), ["bad \u{fffd} byte", "after"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_waits_for_its_frames_then_is_logged_once_the_process_is_quiet() {
        use std::cell::RefCell;
        use tokio::io::AsyncWriteExt;
        let (mut pipe, core) = tokio::io::duplex(1024);
        let got = Rc::new(RefCell::new(Vec::new()));
        let sink = got.clone();
        let reader = records(core, true, move |r| sink.borrow_mut().push(r));
        let process = async move {
            // A frame written a moment after its head still joins it.
            pipe.write_all(b"Exception in thread main\n").await.unwrap();
            tokio::time::sleep(QUIET / 2).await;
            pipe.write_all(b"\tat Main.main(Main.java:3)\n").await.unwrap();
            tokio::time::sleep(QUIET / 2).await;
            assert!(got.borrow().is_empty(), "more frames may come");
            tokio::time::sleep(QUIET).await;
            assert_eq!(texts(&got.borrow()), ["Exception in thread main\n\tat Main.main(Main.java:3)"]);
            // After a quiet time, an indented line begins a record of its own.
            pipe.write_all(b"  late\n").await.unwrap();
            got
        };
        let ((), got) = tokio::join!(reader, process);
        assert_eq!(texts(&got.borrow())[1..], ["  late"]);
    }
}
