//! ws-service: the services behind the gateway in bench/websocket, on the
//! Rust SDK, started by the core.
//!   ws-service echo          subscribes `echo`, answers each request with its
//!                            body (window ECHO_WINDOW, default 16)
//!   ws-service tick NAME MS  every MS ms, mcast_async of a tick (sequence
//!                            number, send time) to NAME: every WebSocket
//!                            connection holding that name gets it

use cumulo::{Answer, Api, SendOptions};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["echo"] => echo(),
        ["tick", name, ms] => match ms.parse() {
            Ok(ms) => tick(name, Duration::from_millis(ms)),
            Err(_) => usage(),
        },
        _ => usage(),
    };
    if let Err(e) = result {
        eprintln!("ws-service: {e}");
        std::process::exit(1);
    }
}

fn usage() -> cumulo::Result<()> {
    eprintln!("usage: ws-service echo | ws-service tick NAME MS");
    std::process::exit(2);
}

fn echo() -> cumulo::Result<()> {
    let window = std::env::var("ECHO_WINDOW").ok().and_then(|w| w.parse().ok()).unwrap_or(16);
    cumulo::run_with_window(window, |api: &mut Api| api.subscribe("echo", |_api, req| Ok(Answer::body(req.request))))
}

/// Ticks until the core terminates the instance; between two ticks it
/// collects the copies' answers (each connection answers once the tick is
/// queued for its browser; at least those already here, so they never pile
/// up), and every 10 s it says how many there were.
fn tick(name: &str, every: Duration) -> cumulo::Result<()> {
    let mut api = Api::new(0)?;
    let (mut copies, mut ok, mut failed) = (0usize, 0u64, 0u64);
    let mut next = Instant::now();
    let mut report = next + Duration::from_secs(10);
    for seq in 0.. {
        copies += api.mcast_async(name, b"", ws_bench::tick_body(seq).as_bytes(), SendOptions::default())?.len();
        // Behind (a tick took longer than `every`): the next one goes at
        // once and none is made up, as a timer that skips missed ticks.
        next = (next + every).max(Instant::now());
        loop {
            match api.recv_async(None, next.saturating_duration_since(Instant::now()))? {
                Some((_, Ok(_))) => ok += 1,
                Some((_, Err(_))) => failed += 1,
                None => break,
            }
        }
        if api.terminated() {
            return Ok(());
        }
        if Instant::now() >= report {
            report += Duration::from_secs(10);
            eprintln!("ws-service tick: {} ticks, {copies} copies, {ok} answered OK, {failed} failed", seq + 1);
        }
    }
    Ok(())
}
