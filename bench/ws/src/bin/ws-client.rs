//! ws-client: the load of bench/websocket, the same for the bare server and
//! the gateway.
//!
//!   ws-client echo --url URL --connections N --window W --size B --warmup S --duration S
//!     N connections, each keeping W text messages of B bytes in flight
//!     (closed loop: an answer sends the next message). Counts the answers
//!     that arrive during the measured seconds and times each (round trip
//!     from its own send). Last line:
//!     `echo: connections=N window=W msgs_per_s=X p50_us=X p99_us=X max_us=X`
//!     With `--ids`, each message is a JSON object with an `"id"` (its
//!     sequence number on the connection), padded to B bytes, as the
//!     gateway's protocol `"id"` takes it; an answer is matched to its
//!     message by the id it starts with (`{"id":N,...`), whatever its order.
//!
//!   ws-client fanout --url URL --connections N --duration S
//!     Opens N connections to URL (all get the same ticks), then for S
//!     seconds records each tick's delivery latency on each connection (now
//!     minus the send time the tick carries), and per tick the time from its
//!     send to the arrival of its last copy (the time one mcast takes to
//!     reach every connection). Last line:
//!     `fanout: connections=N ticks=T complete=K delivered=D expected=E closed=C late=L p50_ms=X p99_ms=X max_ms=X last_p50_ms=X last_p99_ms=X last_max_ms=X`
//!     (expected: ticks seen × N; fewer delivered means lost or late copies;
//!     complete: ticks that reached all N, over which the last_* figures
//!     are taken; closed: connections that failed; late: still without the
//!     window's end 5 s after it).
//!
//! One thread (a current-thread runtime), so the client costs the same
//! whichever server it measures.

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use futures_util::{stream, FutureExt, SinkExt, StreamExt};
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use ws_bench::{now_ns, parse_tick};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connections opened at once: more would overflow the server's listen backlog.
const OPENING: usize = 256;
/// Latency range recorded: 1 µs to 60 s, 3 significant digits.
const MAX_US: u64 = 60_000_000;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Echo(EchoArgs),
    Fanout(FanoutArgs),
}

#[derive(Args)]
struct EchoArgs {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 64)]
    connections: usize,
    #[arg(long, default_value_t = 8)]
    window: usize,
    #[arg(long, default_value_t = 64)]
    size: usize,
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Messages carry an id (the gateway's protocol "id"); answers may come
    /// in any order.
    #[arg(long)]
    ids: bool,
}

#[derive(Args)]
struct FanoutArgs {
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        match cli.cmd {
            Cmd::Echo(a) => echo(a).await,
            Cmd::Fanout(a) => fanout(a).await,
        }
    })
}

/// Opens `n` connections, `OPENING` at a time, handing each to `each` as
/// soon as it is open.
async fn open<T>(url: &str, n: usize, mut each: impl FnMut(Ws) -> T) -> anyhow::Result<Vec<T>> {
    let started = Instant::now();
    let mut opened = Vec::with_capacity(n);
    let mut connecting = stream::iter(0..n)
        .map(|_| tokio_tungstenite::connect_async_with_config(url, Some(ws_bench::config()), true))
        .buffer_unordered(OPENING);
    while let Some(result) = connecting.next().await {
        let (ws, _) = result.with_context(|| format!("opening connection {} of {n} to {url}", opened.len() + 1))?;
        opened.push(each(ws));
    }
    eprintln!("  {n} connections open in {:.1} s", started.elapsed().as_secs_f64());
    Ok(opened)
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).max(1)
}

// --- echo -----------------------------------------------------------------

async fn echo(a: EchoArgs) -> anyhow::Result<()> {
    let conns = open(&a.url, a.connections, |ws| ws).await?;
    let messages = if a.ids {
        Messages::WithIds { size: a.size }
    } else {
        // One message, shared: each send clones a reference, not the bytes.
        Messages::Same { payload: Message::Text(Utf8Bytes::from("x".repeat(a.size))), size: a.size }
    };
    let measured_from = Instant::now() + Duration::from_secs_f64(a.warmup);
    let until = measured_from + Duration::from_secs_f64(a.duration);
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|ws| tokio::spawn(keep_window(ws, a.window, messages.clone(), measured_from, until)))
        .collect();
    let mut all = histogram();
    for t in tasks {
        all.add(t.await??)?;
    }
    println!(
        "echo: connections={} window={} msgs_per_s={:.0} p50_us={} p99_us={} max_us={}",
        a.connections,
        a.window,
        all.len() as f64 / a.duration,
        all.value_at_quantile(0.5),
        all.value_at_quantile(0.99),
        all.max()
    );
    Ok(())
}

/// What a connection sends, and how an answer is matched to its message.
#[derive(Clone)]
enum Messages {
    /// The same message each time; answers come in order.
    Same { payload: Message, size: usize },
    /// `{"id":SEQ,"p":"xx..."}` of `size` bytes (the gateway's protocol
    /// "id"); answers are matched by their id, in whatever order.
    WithIds { size: usize },
}

impl Messages {
    fn make(&self, seq: u64) -> Message {
        match self {
            Messages::Same { payload, .. } => payload.clone(),
            Messages::WithIds { size } => Message::Text(Utf8Bytes::from(id_message(seq, *size))),
        }
    }

    /// Which of the messages in flight (sequence numbers, oldest first)
    /// `answer` answers; None for a ping or pong.
    fn answered(&self, answer: &Message, in_flight: &VecDeque<(u64, Instant)>) -> anyhow::Result<Option<usize>> {
        let index = match (self, answer) {
            (_, Message::Ping(_) | Message::Pong(_)) => return Ok(None),
            (Messages::Same { size, .. }, Message::Text(t)) if t.len() == *size => Some(0),
            (Messages::Same { size, .. }, Message::Binary(b)) if b.len() == *size => Some(0),
            (Messages::WithIds { .. }, Message::Text(t)) => {
                leading_id(t.as_bytes()).and_then(|id| in_flight.iter().position(|(seq, _)| *seq == id))
            }
            _ => None,
        };
        match index {
            Some(i) if i < in_flight.len() => Ok(Some(i)),
            _ => bail!("unexpected answer: {answer:?}"),
        }
    }
}

/// Keeps `window` messages in flight on one connection until `until`, then
/// waits for the last answers. Answers arriving in [`from`, `until`] are
/// counted and timed. Writes are flushed once no further answer is already
/// read, so a burst of answers is followed by one write of as many messages.
async fn keep_window(
    mut ws: Ws,
    window: usize,
    messages: Messages,
    from: Instant,
    until: Instant,
) -> anyhow::Result<Histogram<u64>> {
    let mut hist = histogram();
    // (sequence number, send time) of the messages in flight, oldest first:
    // a window's worth, searched in order (answers come mostly in order).
    let mut in_flight: VecDeque<(u64, Instant)> = VecDeque::with_capacity(window);
    let mut seq = 0u64;
    for _ in 0..window {
        seq += 1;
        ws.feed(messages.make(seq)).await?;
        in_flight.push_back((seq, Instant::now()));
    }
    while !in_flight.is_empty() {
        let answer = next_answer(&mut ws).await?;
        let Some(i) = messages.answered(&answer, &in_flight)? else { continue };
        let (_, sent) = in_flight.remove(i).expect("answered gives an index in flight");
        let now = Instant::now();
        if now >= from && now <= until {
            hist.saturating_record(micros(now - sent));
        }
        if now < until {
            seq += 1;
            ws.feed(messages.make(seq)).await?;
            in_flight.push_back((seq, now));
        }
    }
    // The connection ends with the process: no close handshake to time.
    Ok(hist)
}

/// The next message from the server; what was fed is flushed first when
/// none is already read, so a burst of answers is followed by one write.
async fn next_answer(ws: &mut Ws) -> anyhow::Result<Message> {
    let next = match ws.next().now_or_never() {
        Some(next) => next,
        None => {
            ws.flush().await?;
            ws.next().await
        }
    };
    Ok(next.context("the server closed the connection")??)
}

/// `{"id":SEQ,"p":"xx..."}`, padded with x to `size` bytes (longer when
/// `size` is too small for the id). Written without `format!`: the client's
/// cost per message should stay near the plain echo's, whose message is one
/// shared buffer.
fn id_message(seq: u64, size: usize) -> String {
    const PAD: &str = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(seq);
    let mut m = String::with_capacity(size.max(16 + digits.len()));
    m.push_str("{\"id\":");
    m.push_str(digits);
    m.push_str(",\"p\":\"");
    let mut pad = size.saturating_sub(m.len() + 2);
    while pad > 0 {
        let n = pad.min(PAD.len());
        m.push_str(&PAD[..n]);
        pad -= n;
    }
    m.push_str("\"}");
    m
}

/// The number an answer starts with, `{"id":N` (the gateway's protocol
/// answers and the bare server's echo both begin so): a scan, not a JSON
/// parse, so the client's cost stays the same for both servers.
fn leading_id(text: &[u8]) -> Option<u64> {
    let digits = text.strip_prefix(b"{\"id\":")?;
    let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

// --- fan-out --------------------------------------------------------------

/// Deliveries of ticks sent during the measured window, from every connection.
struct Deliveries {
    /// The window: ticks sent (ns since the epoch) from `from_ns` for
    /// `length_ns` count; `from_ns` is u64::MAX until every connection is open.
    from_ns: AtomicU64,
    length_ns: u64,
    /// Each copy's latency, and per tick its send time, the copies seen and
    /// the arrival of the last one.
    seen: Mutex<Seen>,
}

struct Seen {
    latency_us: Histogram<u64>,
    ticks: BTreeMap<u64, Tick>,
}

struct Tick {
    sent_ns: u64,
    copies: usize,
    last_ns: u64,
}

async fn fanout(a: FanoutArgs) -> anyhow::Result<()> {
    let d = Arc::new(Deliveries {
        from_ns: AtomicU64::new(u64::MAX),
        length_ns: (a.duration * 1e9) as u64,
        seen: Mutex::new(Seen { latency_us: histogram(), ticks: BTreeMap::new() }),
    });
    // Each connection is read from the moment it opens, so that ticks do
    // not pile up unread while the others open.
    let tasks = open(&a.url, a.connections, |ws| tokio::spawn(listen(ws, d.clone()))).await?;
    // A second for the ticks in flight to drain before the window.
    d.from_ns.store(now_ns() + 1_000_000_000, Relaxed);
    // Each listener returns at the first tick sent after the window; one
    // still waiting 5 s later is late (its copies lag, or were lost).
    let give_up = tokio::time::Instant::now() + Duration::from_secs_f64(a.duration + 6.0);
    let (mut closed, mut late) = (0, 0);
    for t in tasks {
        match tokio::time::timeout_at(give_up, t).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                if closed == 0 {
                    eprintln!("  first failed connection: {e:#}");
                }
                closed += 1;
            }
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => late += 1,
        }
    }
    let seen = d.seen.lock().expect("no listener panicked");
    let h = &seen.latency_us;
    // Per tick: from its send to its last copy's arrival, over the ticks
    // that reached every connection (`complete`).
    let mut last = histogram();
    for t in seen.ticks.values().filter(|t| t.copies >= a.connections) {
        last.saturating_record((t.last_ns.saturating_sub(t.sent_ns) / 1000).max(1));
    }
    let ticks = seen.ticks.len() as u64;
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "fanout: connections={} ticks={ticks} complete={} delivered={} expected={} closed={closed} late={late} \
         p50_ms={:.2} p99_ms={:.2} max_ms={:.2} last_p50_ms={:.2} last_p99_ms={:.2} last_max_ms={:.2}",
        a.connections,
        last.len(),
        h.len(),
        ticks * a.connections as u64,
        ms(h.value_at_quantile(0.5)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max()),
        ms(last.value_at_quantile(0.5)),
        ms(last.value_at_quantile(0.99)),
        ms(last.max())
    );
    Ok(())
}

/// Records the delivery of each tick sent in the window; returns at the
/// first tick sent after it.
async fn listen(mut ws: Ws, d: Arc<Deliveries>) -> anyhow::Result<()> {
    while let Some(next) = ws.next().await {
        let Message::Text(text) = next? else { continue };
        let now = now_ns();
        let (seq, sent) = parse_tick(&text).with_context(|| format!("not a tick: {text:?}"))?;
        let from = d.from_ns.load(Relaxed);
        if sent >= from.saturating_add(d.length_ns) {
            return Ok(());
        }
        if sent >= from {
            let mut seen = d.seen.lock().expect("no listener panicked");
            seen.latency_us.saturating_record((now.saturating_sub(sent) / 1000).max(1));
            let t = seen.ticks.entry(seq).or_insert(Tick { sent_ns: sent, copies: 0, last_ns: 0 });
            t.copies += 1;
            t.last_ns = t.last_ns.max(now);
        }
    }
    bail!("the server closed the connection")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_messages_are_padded_json_whose_id_is_read_back() {
        for (seq, size) in [(0, 64), (7, 64), (u64::MAX, 64), (9, 200)] {
            let m = id_message(seq, size);
            assert_eq!(m.len(), size, "{m}");
            assert!(m.starts_with(&format!("{{\"id\":{seq},\"p\":\"x")) && m.ends_with("x\"}"), "{m}");
            assert_eq!(leading_id(m.as_bytes()), Some(seq), "{m}");
        }
        // too small for its id: no padding, still whole
        assert_eq!(id_message(123, 10), r#"{"id":123,"p":""}"#);
        assert_eq!(leading_id(br#"{"id":42,"status":"OK","response":{"id":42}}"#), Some(42));
        assert_eq!(leading_id(br#"{"id":"a"}"#), None);
    }
}
