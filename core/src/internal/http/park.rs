//! Idle keep-alive connections without hyper. hyper's HTTP/1 connection
//! keeps an 8 KiB read buffer and an 8 KiB write buffer for its whole life
//! (no builder option shrinks them below 8 KiB), and a connection waiting
//! for its next request touches pages of both: about 11 KB resident per
//! idle connection. So a connection is served by hyper only from the first
//! bytes of a request to its written response: in between it is "parked",
//! the socket alone waiting to become readable, and hyper's connection is
//! taken apart (`into_parts`, which hands back the socket and any bytes
//! read ahead) and dropped. The bytes that wake a parked connection are
//! handed to the next hyper connection first (`Rewind`).
//!
//! A connection is parked only when hyper is between requests (deadlines.rs
//! `Event::Idle`: a request was served, its response is written, nothing
//! is being served), and at most once per request served, so a head that
//! arrives in pieces is parsed by one hyper connection, not once per piece.

use bytes::{Bytes, BytesMut};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read at once while parked; more stay in the socket for hyper.
const WAKE_READ: usize = 2048;

/// A stream that first gives back bytes already read from it.
pub struct Rewind<S> {
    inner: S,
    prefix: Bytes,
}

impl<S> Rewind<S> {
    pub fn new(inner: S) -> Rewind<S> {
        Rewind { inner, prefix: Bytes::new() }
    }

    /// `bytes` (read ahead by hyper) come before what is left.
    pub fn unread(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        if self.prefix.is_empty() {
            self.prefix = bytes;
        } else {
            let mut joined = BytesMut::with_capacity(bytes.len() + self.prefix.len());
            joined.extend_from_slice(&bytes);
            joined.extend_from_slice(&self.prefix);
            self.prefix = joined.freeze();
        }
    }
}

impl<S: AsyncRead + Unpin> Rewind<S> {
    /// Waits for new bytes from the stream and keeps them for the next
    /// reader; 0 at the end of the stream.
    pub async fn fill(&mut self) -> io::Result<usize> {
        poll_fn(|cx| {
            let mut space = [0u8; WAKE_READ];
            let mut buf = ReadBuf::new(&mut space);
            ready!(Pin::new(&mut self.inner).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            if n > 0 {
                let mut joined = BytesMut::with_capacity(self.prefix.len() + n);
                joined.extend_from_slice(&self.prefix);
                joined.extend_from_slice(buf.filled());
                self.prefix = joined.freeze();
            }
            Poll::Ready(Ok(n))
        })
        .await
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_read_ahead_come_first_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut r = Rewind::new(server);
        client.write_all(b"GET / HT").await.unwrap();
        assert_eq!(r.fill().await.unwrap(), 8);
        r.unread(Bytes::from_static(b"(ahead)"));
        client.write_all(b"TP/1.1\r\n").await.unwrap();
        drop(client);
        let mut all = Vec::new();
        r.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"(ahead)GET / HTTP/1.1\r\n");
    }

    #[tokio::test]
    async fn fill_reports_the_end_of_the_stream() {
        let (client, server) = tokio::io::duplex(64);
        drop(client);
        assert_eq!(Rewind::new(server).fill().await.unwrap(), 0);
    }
}
