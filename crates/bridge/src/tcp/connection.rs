//! One tcp connection: messages are read and sent on as requests, up to
//! `pipeline` in flight at once; answers are written back in the order of
//! the messages (each waits for the ones before it), several ready ones in
//! one write. Bad input, an idle peer or one that does not read its answers
//! ends the connection with a last message `error: <reason>`.

use super::Shared;
use crate::framing::Framing;
use crate::report::Counters;
use crate::{BridgeError, Pending};
use bytes::BytesMut;
use cumulo_service::{SendOptions, ServiceApi, Status};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::time::{sleep_until, timeout, Instant};

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 16 * 1024;
/// After the last message, how long a closing connection's input is still
/// read and dropped, so that the peer gets its last message: closing with
/// unread input would reset the connection and lose it.
const LINGER: Duration = Duration::from_millis(500);
/// How much input a closing connection reads and drops at most.
const LINGER_BYTES: usize = 1 << 20;

/// Keeps the open-connections gauge right however the task ends.
struct Open(Rc<Counters>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.set(self.0.open.get().saturating_sub(1));
    }
}

pub(super) async fn serve<A: ServiceApi>(shared: Rc<Shared<A>>, stream: TcpStream, peer: SocketAddr) {
    let _open = Open(shared.counters.clone());
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let s = &shared.settings;
    let c = &shared.counters;
    let info = crate::connection_info(s.common.send_connection_info, peer);
    let options = SendOptions { timeout_ms: s.common.timeout_ms, priority: s.common.priority, wait_for_service: false };
    let send = |body: &[u8]| -> Pending {
        Counters::add(&c.messages);
        Box::pin(shared.api.call(&s.common.dest, &info, body, options))
    };

    let mut decoder = s.framing.decoder(s.common.max_message);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let mut a = Answers { wr, pending: VecDeque::new(), out: Vec::new(), framing: s.framing, counters: c.clone() };
    // Set once the peer closed its side (or sent what ends the connection):
    // what is in flight is answered, then the connection closes.
    let mut eof = false;
    let mut closing: Option<BridgeError> = None;
    let mut idle_deadline = Instant::now() + s.idle_timeout;
    loop {
        // Every whole message read so far, up to the pipeline's bound.
        while closing.is_none() && a.pending.len() < s.pipeline {
            let next = if eof { decoder.finish(&mut buf) } else { decoder.next(&mut buf) };
            match next {
                Ok(Some(message)) => {
                    a.pending.push_back(send(&message));
                    idle_deadline = Instant::now() + s.idle_timeout;
                }
                Ok(None) => break,
                Err(e) => closing = Some(e),
            }
        }
        let reading = !eof && closing.is_none() && a.pending.len() < s.pipeline;
        if a.pending.is_empty() && !reading {
            break;
        }
        if reading && buf.capacity() - buf.len() < READ_CHUNK / 4 {
            // Bounded: the buffer holds at most one message in the making
            // (the decoder refuses more than max_message) and one read.
            buf.reserve(READ_CHUNK);
        }
        tokio::select! {
            read = rd.read_buf(&mut buf), if reading => match read {
                Ok(0) => eof = true,
                Ok(_) => {}
                Err(_) => return,
            },
            answer = next_answer(&mut a.pending) => {
                put_answer(answer, s.framing, c, &mut a.out);
                // The answers that are in too, in order, join the same write.
                while let Some(answer) = ready_answer(&mut a.pending) {
                    put_answer(answer, s.framing, c, &mut a.out);
                }
                match timeout(s.idle_timeout, a.wr.write_all(&a.out)).await {
                    Ok(Ok(())) => a.out.clear(),
                    Ok(Err(_)) => return,
                    Err(_) => {
                        c.error(BridgeError::SlowReader.kind());
                        return;
                    }
                }
                idle_deadline = Instant::now() + s.idle_timeout;
            },
            // Bytes that make no whole message (a slow or stuck peer) do
            // not keep a connection: only messages and answers do.
            _ = sleep_until(idle_deadline), if a.pending.is_empty() => closing = Some(BridgeError::Idle),
        }
    }
    if let Some(e) = closing {
        c.error(e.kind());
        s.framing.encode(&e.message(), &mut a.out);
        if timeout(s.idle_timeout, a.wr.write_all(&a.out)).await.is_err() {
            return;
        }
        a.out.clear();
        let _ = a.wr.shutdown().await;
        // The peer's unread input, dropped, so that the close is a FIN
        // after our last message rather than a reset that may lose it.
        let mut sink = vec![0u8; READ_CHUNK];
        let mut left = LINGER_BYTES;
        let _ = timeout(LINGER, async {
            while let Ok(n @ 1..) = rd.read(&mut sink).await {
                left = left.saturating_sub(n);
                if left == 0 {
                    break;
                }
            }
        })
        .await;
    } else {
        let _ = a.wr.shutdown().await;
    }
}

/// The writing side of a connection and the messages in flight on it. If
/// the connection's task is dropped with messages in flight (the bridge
/// stops: its service is stopped or restarted, the core shuts down), each
/// still gets its answer if it is in, else `error: SHUTTING_DOWN`, in one
/// write that does not wait: never a silent close.
struct Answers {
    wr: OwnedWriteHalf,
    pending: VecDeque<Pending>,
    /// Answers being written; not empty only while a write is under way.
    out: Vec<u8>,
    framing: Framing,
    counters: Rc<Counters>,
}

impl Drop for Answers {
    fn drop(&mut self) {
        // A write cut short: the peer has part of a message, and nothing
        // more can be framed after it.
        if self.pending.is_empty() || !self.out.is_empty() {
            return;
        }
        let mut out = Vec::new();
        while let Some(mut answer) = self.pending.pop_front() {
            match answer.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(answer) => put_answer(answer, self.framing, &self.counters, &mut out),
                Poll::Pending => {
                    self.counters.failed(Status::ShuttingDown);
                    self.framing.encode(format!("error: {}", Status::ShuttingDown.name()).as_bytes(), &mut out);
                }
            }
        }
        let _ = self.wr.try_write(&out);
    }
}

/// The answer to the oldest message in flight (never resolves when none).
async fn next_answer(pending: &mut VecDeque<Pending>) -> cumulo_service::Response {
    let answer = match pending.front_mut() {
        Some(front) => front.as_mut().await,
        None => std::future::pending().await,
    };
    pending.pop_front();
    answer
}

/// The oldest answer if it is in already.
fn ready_answer(pending: &mut VecDeque<Pending>) -> Option<cumulo_service::Response> {
    let front = pending.front_mut()?;
    match front.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => {
            pending.pop_front();
            Some(answer)
        }
        Poll::Pending => None,
    }
}

fn put_answer(answer: cumulo_service::Response, framing: Framing, c: &Counters, out: &mut Vec<u8>) {
    match crate::answer_body(answer) {
        Ok(body) => {
            Counters::add(&c.answers);
            framing.encode(&body, out);
        }
        Err((status, message)) => {
            c.failed(status);
            framing.encode(&message, out);
        }
    }
}
