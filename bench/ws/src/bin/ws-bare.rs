//! ws-bare: the ceiling of bench/websocket. A WebSocket server on the
//! gateway's own library (tokio-tungstenite) that does nothing but echo each
//! text or binary message back; with `--tick-ms`, it also sends every
//! connection a tick (sequence number, send time) at that interval, the
//! bare form of the gateway's mcast to every connection on a path.
//! One thread, as the core's (gateway and routing share one current-thread
//! runtime, docs/ARCHITECTURE.md).
//!   ws-bare --port PORT [--tick-ms MS]

use clap::Parser;
use futures_util::{FutureExt, SinkExt, StreamExt};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
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
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", args.port)).await?;
    let ticks = args.tick_ms.map(|ms| {
        let (tx, _) = broadcast::channel(16);
        tokio::spawn(send_ticks(Duration::from_millis(ms), tx.clone()));
        tx
    });
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
