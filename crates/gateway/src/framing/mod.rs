//! A watch on the request framing of one gateway connection, beside hyper's
//! own parser, for two refusals hyper cannot be asked for:
//! - a chunk size that takes the body over `max_body` is refused at once
//!   (413), not after `body_timeout_ms` of waiting for bytes that could
//!   never fit: hyper reads chunk sizes inside its decoder and tells no one;
//! - a `Content-Length` of 2^64-2 or 2^64-1 is answered 413 like any other
//!   length over `max_body`: hyper refuses these two values itself, as a head
//!   too large (431), before the gateway sees the request.
//!
//! hyper's http1 builder has no option for either, so `Watched` sits between
//! hyper and the socket: `Framing` follows heads (parsed with httparse, as
//! hyper parses them), lengths and chunk sizes in the bytes hyper reads. A
//! refused chunk becomes a read error that reaches the gateway through the
//! body (which answers 413); a refused length turns hyper's automatic 431
//! into a 413. On anything it does not follow exactly (an upgrade, CONNECT,
//! a head or length hyper refuses) the watch stops for the rest of the
//! connection, so it only ever refuses what it understood. Cost: one pass
//! over each head and chunk-size line; body bytes are counted, not read.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest `Content-Length` hyper takes (its `MAX_LEN`); the two values
/// above it it refuses as a head too large.
const HYPER_MAX_LENGTH: u64 = u64::MAX - 2;
/// hyper's automatic answer to a head too large, as it writes it.
const HYPER_431: &[u8] = b"HTTP/1.1 431 ";
/// Headers parsed on the stack; more (a larger `max_headers`) on the heap.
const STACK_HEADERS: usize = 128;

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body: u64,
    pub max_header_size: usize,
    pub max_headers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A `Content-Length` over what hyper takes.
    ContentLength,
    /// Chunk sizes adding up to more than `max_body`.
    ChunkSize,
}

/// The read error a refused chunk size becomes; the gateway finds it in the
/// body's error and answers 413.
#[derive(Debug)]
pub struct OversizedChunk;

impl std::fmt::Display for OversizedChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the chunk sizes add up to more than max_body")
    }
}

impl std::error::Error for OversizedChunk {}

/// Whether a body read failed because of an oversized chunk.
pub fn is_oversized_chunk(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()).is_some_and(|inner| inner.is::<OversizedChunk>())
        {
            return true;
        }
        cur = err.source();
    }
    false
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a head: empty lines are skipped, as httparse skips them.
    HeadStart,
    /// In a head; `line_ended`: the last byte other than CR was a LF.
    Head {
        line_ended: bool,
    },
    Body {
        left: u64,
    },
    /// A chunk-size line: hex digits, then an extension up to LF.
    ChunkSize {
        size: u64,
        digits: bool,
        after_digits: bool,
    },
    ChunkData {
        left: u64,
    },
    /// The CRLF after a chunk's data.
    ChunkDataEnd,
    /// After the last chunk: trailer lines up to an empty one.
    Trailers {
        line_ended: bool,
    },
    Refused(Refusal),
    /// Not followed any more: hyper decides alone.
    Lost,
}

pub struct Framing {
    limits: Limits,
    state: State,
    head: Vec<u8>,
    /// Chunk sizes of the current body so far.
    declared: u64,
}

impl Framing {
    pub fn new(limits: Limits) -> Framing {
        Framing { limits, state: State::HeadStart, head: Vec::new(), declared: 0 }
    }

    pub fn refused(&self) -> Option<Refusal> {
        match self.state {
            State::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// Follows `bytes` (the next bytes of the connection); returns how many
    /// of them hyper may read: all, unless a chunk size is refused in them
    /// (hyper then never sees the end of that line).
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match &mut self.state {
                State::Refused(_) | State::Lost => return bytes.len(),
                State::Body { left } | State::ChunkData { left } => {
                    let n = (*left).min((bytes.len() - i) as u64);
                    *left -= n;
                    i += n as usize;
                    if *left == 0 {
                        self.state = if matches!(self.state, State::Body { .. }) {
                            State::HeadStart
                        } else {
                            State::ChunkDataEnd
                        };
                    }
                    continue;
                }
                State::HeadStart => {
                    if b != b'\r' && b != b'\n' {
                        self.head.clear();
                        self.state = State::Head { line_ended: false };
                        continue;
                    }
                }
                State::Head { line_ended } => {
                    // A line at a time, up to and with its '\n', not a byte
                    // at a time: the head is most of what this reads.
                    let rest = &bytes[i..];
                    let newline = rest.iter().position(|&c| c == b'\n');
                    let run = &rest[..newline.unwrap_or(rest.len())];
                    if *line_ended && run.iter().any(|&c| c != b'\r') {
                        *line_ended = false;
                    }
                    let ends_head = newline.is_some() && *line_ended;
                    *line_ended |= newline.is_some();
                    let taken = run.len() + usize::from(newline.is_some());
                    self.head.extend_from_slice(&rest[..taken]);
                    i += taken;
                    // As byte by byte: too long before its last byte, or
                    // (after head_done) with it, it is lost.
                    let max = self.limits.max_header_size;
                    if self.head.len() - usize::from(ends_head) > max {
                        self.state = State::Lost; // hyper refuses it (431)
                    } else if ends_head {
                        self.state = self.head_done();
                        if self.head.len() > max {
                            self.state = State::Lost;
                        }
                    }
                    continue;
                }
                State::ChunkSize { size, digits, after_digits } => match b {
                    b'\n' if !*digits => self.state = State::Lost,
                    b'\n' => {
                        let size = *size;
                        self.declared = self.declared.saturating_add(size);
                        if self.declared > self.limits.max_body {
                            self.state = State::Refused(Refusal::ChunkSize);
                            return i;
                        }
                        self.state = if size == 0 {
                            State::Trailers { line_ended: true }
                        } else {
                            State::ChunkData { left: size }
                        };
                    }
                    _ if *after_digits => {}
                    _ => match (b as char).to_digit(16) {
                        Some(d) => match size.checked_mul(16).and_then(|s| s.checked_add(d as u64)) {
                            Some(s) => (*size, *digits) = (s, true),
                            None => self.state = State::Lost, // hyper refuses it (400)
                        },
                        None => *after_digits = true,
                    },
                },
                State::ChunkDataEnd => {
                    if b == b'\n' {
                        self.state = State::ChunkSize { size: 0, digits: false, after_digits: false };
                    }
                }
                State::Trailers { line_ended } => match b {
                    b'\n' if *line_ended => self.state = State::HeadStart,
                    b'\n' => *line_ended = true,
                    b'\r' => {}
                    _ => *line_ended = false,
                },
            }
            i += 1;
        }
        bytes.len()
    }

    /// The state after a complete head: how its body is framed.
    fn head_done(&mut self) -> State {
        let state = framing_of(&self.head, self.limits.max_headers);
        self.declared = 0;
        if self.head.capacity() > 4096 {
            self.head = Vec::new(); // a large head's buffer is not kept
        }
        state
    }
}

fn framing_of(head: &[u8], max_headers: usize) -> State {
    let mut on_stack = [httparse::EMPTY_HEADER; STACK_HEADERS];
    let mut on_heap = Vec::new();
    let headers = if max_headers <= STACK_HEADERS {
        &mut on_stack[..max_headers]
    } else {
        on_heap.resize(max_headers, httparse::EMPTY_HEADER);
        &mut on_heap[..]
    };
    let mut req = httparse::Request::new(headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return State::Lost, // hyper refuses it, or it is not what it seems
    }
    if req.method == Some("CONNECT") {
        return State::Lost;
    }
    let (mut chunked, mut te, mut length) = (false, false, None);
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
            chunked = h
                .value
                .rsplit(|&c| c == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("content-length") {
            match (digits(h.value.trim_ascii()), length) {
                (Some(n), None) => length = Some(n),
                (Some(n), Some(seen)) if n == seen => {}
                _ => return State::Lost, // invalid or conflicting: hyper refuses it (400)
            }
        } else if h.name.eq_ignore_ascii_case("upgrade") {
            return State::Lost;
        }
    }
    match (te, chunked, length) {
        (true, _, _) if req.version != Some(1) => State::Lost,
        (true, true, _) => State::ChunkSize { size: 0, digits: false, after_digits: false },
        (true, false, _) => State::Lost,
        (false, _, Some(n)) if n > HYPER_MAX_LENGTH => State::Refused(Refusal::ContentLength),
        (false, _, Some(n)) if n > 0 => State::Body { left: n },
        _ => State::HeadStart,
    }
}

/// A decimal number as hyper reads a Content-Length: digits only.
fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(
        0u64,
        |n, &c| if c.is_ascii_digit() { n.checked_mul(10)?.checked_add((c - b'0') as u64) } else { None },
    )
}

/// The connection's byte stream, watched by `Framing`.
pub struct Watched<S> {
    inner: S,
    framing: Framing,
    /// The 413 written in place of hyper's 431, and how much of it is out.
    answer: Option<(Vec<u8>, usize)>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, limits: Limits) -> Watched<S> {
        Watched { inner, framing: Framing::new(limits), answer: None }
    }
}

impl<S: AsyncWrite + Unpin> Watched<S> {
    /// Writes what is left of our own answer, if any.
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((text, sent)) = &mut self.answer {
            if *sent == text.len() {
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &text[*sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *sent += n;
        }
        Poll::Ready(Ok(()))
    }

    /// hyper's 431 for a refused Content-Length: our 413 goes out instead.
    fn replaces(&mut self, first: &[u8]) -> bool {
        if self.answer.is_some()
            || self.framing.refused() != Some(Refusal::ContentLength)
            || !first.starts_with(HYPER_431)
        {
            return false;
        }
        let body =
            format!("payload too large: the request body is over max_body ({} bytes)\n", self.framing.limits.max_body);
        let text = format!(
            "HTTP/1.1 413 Payload Too Large\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        self.answer = Some((text.into_bytes(), 0));
        true
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let oversized = || io::Error::new(io::ErrorKind::InvalidData, OversizedChunk);
        if self.framing.refused() == Some(Refusal::ChunkSize) {
            return Poll::Ready(Err(oversized()));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let keep = self.framing.feed(&buf.filled()[before..]);
        let read = buf.filled().len() - before;
        if keep < read {
            if keep == 0 {
                return Poll::Ready(Err(oversized())); // no byte for hyper: an empty read would mean the end
            }
            buf.set_filled(before + keep);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_answer(cx))?;
        if self.replaces(data) {
            return Poll::Ready(Ok(data.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_answer(cx))?;
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &b[..]);
        if self.replaces(first) {
            return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_answer(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_answer(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
