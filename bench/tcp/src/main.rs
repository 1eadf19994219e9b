//! bench/tcp/run's programs.
//!
//! `tcp-bench client --port P [--connections C] [--pipeline D] [--size B]
//! [--duration S] [--warmup S]`: C connections to 127.0.0.1:P, each keeping
//! D lines of B bytes in flight (a new line written for each answer read);
//! answers are counted after the warm-up for S seconds. Its last line:
//! `answers=<n> msg_per_s=<x> errors=<n>`, an error being an answer that is
//! not the line sent (`error: ...` from the bridge, or bytes out of order).
//!
//! `tcp-bench echo --port P`: the baseline, a bare tokio echo server on one
//! thread (as the core's event loop is): what it reads it writes back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

struct Args(Vec<String>);

impl Args {
    fn get(&self, name: &str, default: u64) -> u64 {
        match self.0.iter().position(|a| a == name) {
            Some(i) => self.0.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            None => default,
        }
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: tcp-bench client --port P [--connections C] [--pipeline D] [--size B] [--duration S] [--warmup S]\n       \
         tcp-bench echo --port P"
    );
    std::process::exit(2)
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = Args(argv.clone());
    let port = args.get("--port", 0) as u16;
    if port == 0 {
        usage();
    }
    match argv.first().map(String::as_str) {
        Some("echo") => {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            rt.block_on(echo(port));
        }
        Some("client") => {
            let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
            rt.block_on(client(port, &args));
        }
        _ => usage(),
    }
}

async fn echo(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind the echo port");
    loop {
        let Ok((mut s, _)) = listener.accept().await else { continue };
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n @ 1..) = s.read(&mut buf).await {
                if s.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        });
    }
}

async fn client(port: u16, args: &Args) {
    let connections = args.get("--connections", 32);
    let pipeline = args.get("--pipeline", 8).max(1);
    let size = args.get("--size", 64) as usize;
    let duration = Duration::from_secs(args.get("--duration", 10));
    let warmup = Duration::from_secs(args.get("--warmup", 1));
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut line = vec![b'x'; size];
    line.push(b'\n');
    let line = Arc::new(line);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (counting, stop, answers, errors, line) =
            (counting.clone(), stop.clone(), answers.clone(), errors.clone(), line.clone());
        tasks.push(tokio::spawn(async move {
            let s = match TcpStream::connect(("127.0.0.1", port)).await {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("tcp-bench: cannot connect to port {port}: {e}");
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            let _ = s.set_nodelay(true);
            let (rd, mut wr) = s.into_split();
            let mut rd = BufReader::with_capacity(64 * 1024, rd);
            let mut burst = Vec::new();
            for _ in 0..pipeline {
                burst.extend_from_slice(&line);
            }
            if wr.write_all(&burst).await.is_err() {
                errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let mut got = Vec::with_capacity(line.len());
            while !stop.load(Ordering::Relaxed) {
                got.clear();
                match rd.read_until(b'\n', &mut got).await {
                    Ok(n) if n > 0 => {}
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
                if got != *line {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                if counting.load(Ordering::Relaxed) {
                    answers.fetch_add(1, Ordering::Relaxed);
                }
                // The answers already buffered are all read before one write
                // sends as many lines back, as a pipelining client does.
                let mut owed = 1;
                while rd.buffer().contains(&b'\n') && owed < pipeline {
                    got.clear();
                    if rd.read_until(b'\n', &mut got).await.is_err() {
                        break;
                    }
                    if got != *line {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    if counting.load(Ordering::Relaxed) {
                        answers.fetch_add(1, Ordering::Relaxed);
                    }
                    owed += 1;
                }
                burst.clear();
                for _ in 0..owed {
                    burst.extend_from_slice(&line);
                }
                if wr.write_all(&burst).await.is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    counting.store(true, Ordering::Relaxed);
    let start = Instant::now();
    tokio::time::sleep(duration).await;
    counting.store(false, Ordering::Relaxed);
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let n = answers.load(Ordering::Relaxed);
    println!("answers={n} msg_per_s={:.0} errors={}", n as f64 / elapsed, errors.load(Ordering::Relaxed));
    // The connections are dropped with the runtime; the process exits.
    std::process::exit(0);
}
