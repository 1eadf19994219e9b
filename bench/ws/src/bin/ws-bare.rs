//! ws-bare: the ceiling of bench/websocket. A WebSocket server on the
//! gateway's own library (tokio-tungstenite) that does nothing but echo each
//! text or binary message back; with `--tick-ms`, it also sends every
//! connection a tick (sequence number, send time) at that interval, the
//! bare form of the gateway's mcast to every connection on a path.
//! Built as the core is (docs/ARCHITECTURE.md, shards): `--threads` threads
//! (default: one per CPU, as `core.threads`), each a current-thread runtime
//! with its own listener on the port (SO_REUSEPORT: the kernel spreads the
//! connections), so that the ceiling has the gateway's threads.
//!   ws-bare --port PORT [--tick-ms MS] [--threads N]

use clap::Parser;
use futures_util::{FutureExt, SinkExt, StreamExt};
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

#[derive(Parser)]
struct Args {
    /// Port on 127.0.0.1.
    #[arg(long)]
    port: u16,
    /// Send every connection a tick this often (ms).
    #[arg(long)]
    tick_ms: Option<u64>,
    /// Threads, each with its own listener (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    // One sender of ticks for every thread's connections.
    let ticks = args.tick_ms.map(|_| broadcast::channel::<Utf8Bytes>(16).0);
    let serving: Vec<_> = (0..threads)
        .map(|i| {
            let ticks = ticks.clone();
            let (port, tick_ms) = (args.port, args.tick_ms);
            std::thread::spawn(move || -> anyhow::Result<()> {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                rt.block_on(async move {
                    if let (0, Some(ms), Some(tx)) = (i, tick_ms, &ticks) {
                        tokio::spawn(send_ticks(Duration::from_millis(ms), tx.clone()));
                    }
                    serve(port, ticks).await
                })
            })
        })
        .collect();
    for t in serving {
        t.join().map_err(|_| anyhow::anyhow!("a serving thread panicked"))??;
    }
    Ok(())
}

/// One thread's listener and its connections.
async fn serve(port: u16, ticks: Option<broadcast::Sender<Utf8Bytes>>) -> anyhow::Result<()> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseport(true)?;
    socket.bind(([127, 0, 0, 1], port).into())?;
    let listener = socket.listen(4096)?;
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let ticks = ticks.as_ref().map(|tx| tx.subscribe());
        tokio::spawn(async move {
            let Ok(ws) = tokio_tungstenite::accept_async_with_config(tcp, Some(ws_bench::config())).await else {
                return;
            };
            match ticks {
                Some(rx) => fan_out(ws, rx).await,
                None => echo(ws).await,
            }
        });
    }
}

/// Echoes messages back; writes are flushed only when no further message is
/// already read, so a window of messages is answered in one write.
async fn echo(mut ws: WebSocketStream<TcpStream>) {
    loop {
        let next = match ws.next().now_or_never() {
            Some(next) => next,
            None => {
                if ws.flush().await.is_err() {
                    return;
                }
                ws.next().await
            }
        };
        match next {
            Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                if ws.feed(m).await.is_err() {
                    return;
                }
            }
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
            Some(Ok(_)) => {} // pings are answered by the library
        }
    }
}

/// Sends each tick to the connection, reading meanwhile (for pings and the close).
async fn fan_out(mut ws: WebSocketStream<TcpStream>, mut ticks: broadcast::Receiver<Utf8Bytes>) {
    loop {
        tokio::select! {
            tick = ticks.recv() => match tick {
                Ok(t) => if ws.send(Message::Text(t)).await.is_err() { return },
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return,
            },
            next = ws.next() => if !matches!(next, Some(Ok(_))) { return },
        }
    }
}

async fn send_ticks(every: Duration, tx: broadcast::Sender<Utf8Bytes>) {
    let mut interval = tokio::time::interval(every);
    for seq in 0.. {
        interval.tick().await;
        // No receiver yet is not an error: the ticks go on.
        let _ = tx.send(ws_bench::tick_body(seq).into());
    }
}
