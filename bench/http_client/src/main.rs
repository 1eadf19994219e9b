//! Closed-loop load against one URL, `concurrency` requests in flight, for
//! `seconds`; prints `<requests per second> req/s` (non-200 answers and
//! failures counted apart and reported on stderr).
//!
//!   hc-bench bare URL CONCURRENCY SECONDS
//!     hyper-util's pooled client on a current-thread runtime (the ceiling);
//!   hc-bench sdk SOCKET NAME URL CONCURRENCY SECONDS
//!     the Rust SDK, one unmanaged instance keeping CONCURRENCY send_async
//!     calls to NAME (an `http_client` service's `<prefix>get`) in flight.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        eprintln!("hc-bench: argument {i} ({what}) missing or invalid");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (done, bad, seconds) = match args.get(1).map(String::as_str) {
        Some("bare") => {
            let (url, c, s): (String, usize, f64) =
                (arg(&args, 2, "URL"), arg(&args, 3, "CONCURRENCY"), arg(&args, 4, "SECONDS"));
            let (d, b) = bare(&url, c, Duration::from_secs_f64(s));
            (d, b, s)
        }
        Some("sdk") => {
            let (socket, name, url): (String, String, String) =
                (arg(&args, 2, "SOCKET"), arg(&args, 3, "NAME"), arg(&args, 4, "URL"));
            let (c, s): (usize, f64) = (arg(&args, 5, "CONCURRENCY"), arg(&args, 6, "SECONDS"));
            let (d, b) = sdk(&socket, &name, &url, c, Duration::from_secs_f64(s));
            (d, b, s)
        }
        _ => {
            eprintln!("usage: hc-bench bare URL CONCURRENCY SECONDS | sdk SOCKET NAME URL CONCURRENCY SECONDS");
            std::process::exit(2)
        }
    };
    if bad > 0 {
        eprintln!("hc-bench: {bad} requests failed or were not 200");
    }
    println!("{:.0} req/s", done as f64 / seconds);
}

fn bare(url: &str, concurrency: usize, run: Duration) -> (u64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let uri: hyper::Uri = url.parse().expect("a URL");
        let (done, bad) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
        let end = Instant::now() + run;
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (client, uri, done, bad) = (client.clone(), uri.clone(), done.clone(), bad.clone());
                tokio::task::spawn_local(async move {
                    while Instant::now() < end {
                        match client.get(uri.clone()).await {
                            Ok(r) if r.status() == 200 => match r.into_body().collect().await {
                                Ok(_) => done.set(done.get() + 1),
                                Err(_) => bad.set(bad.get() + 1),
                            },
                            _ => bad.set(bad.get() + 1),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        (done.get(), bad.get())
    })
}

fn sdk(socket: &str, name: &str, url: &str, concurrency: usize, run: Duration) -> (u64, u64) {
    let mut api = cumulo::Api::connect(cumulo::Options::unmanaged(socket, "/bench/")).expect("connect to the core");
    let info = cumulo::info::encode(&[("url", url)]);
    let o = cumulo::SendOptions { timeout: 10_000, ..Default::default() };
    for _ in 0..concurrency {
        api.send_async(name, &info, b"", o);
    }
    let (mut done, mut bad, mut in_flight) = (0u64, 0u64, concurrency);
    let end = Instant::now() + run;
    while in_flight > 0 {
        let Some((_, r)) = api.recv_async(None, Duration::from_secs(10)).expect("recv_async") else { break };
        in_flight -= 1;
        match r {
            Ok(r) if cumulo::info::get(&r.info, b"status") == Some(b"200") => done += 1,
            _ => bad += 1,
        }
        if Instant::now() < end {
            api.send_async(name, &info, b"", o);
            in_flight += 1;
        }
    }
    (done, bad)
}
