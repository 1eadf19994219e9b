//! The service the end-to-end tests run under the core. Its behaviour comes
//! from its environment:
//!
//! - `TS_MODE`: `echo` (default), `sleep` (sleep `TS_SLEEP_MS`, then answer),
//!   `hang` (never answer), `error` (the handler fails), `forward` (sleep
//!   `TS_SLEEP_MS`, then forward to `TS_FORWARD_TO`), `exit` (exit with
//!   `TS_EXIT_CODE`, default 1, before connecting), `noconnect` (never
//!   connect);
//! - `TS_PATTERNS`: comma-separated patterns to subscribe (default `*`);
//! - `TS_TAG`: a label put in every answer (default: the prefix);
//! - `TS_WINDOW`: the window asked for (default 1);
//! - `TS_START_DELAY_MS`: wait before connecting (a late subscriber);
//! - `TS_HANG_AFTER`: in any mode, answer that many requests per instance,
//!   then hang in the next one (keeping the connection open);
//! - `TS_SOCKET`: connect there instead of `CUMULO_SOCKET` (the core's TCP
//!   listener, say, with `CUMULO_TLS_CA` for TLS);
//! - `TS_RECORD`: a file to which every request's body is appended as one
//!   line before it is answered (O_APPEND: processes and restarts share it),
//!   so a test can count what was delivered.
//!
//! A request body can also ask, in any mode: `sleep:N` (sleep N ms first),
//! `crash` (die by SIGKILL mid-request), `fail` (handler error), `panic`,
//! `big:N` (answer N bytes instead of the echo).
//!
//! Every answer echoes the request body; its response_info tells who
//! answered and what it saw: tag, pid, process, thread, instance,
//! process_count, thread_count, name, pattern, timeout, priority, sync,
//! source, and seq (the instance's count of requests so far, which shows
//! the order requests were served in).
//!
//! Each instance prints `ts-ready ...` once subscribed; the core logs it.
#![allow(unsafe_code, reason = "signals and rlimits for test processes through libc; a SAFETY comment on every block")]

use cumulo::{Answer, Api, HandlerResult, Options, Request};
use std::time::Duration;

#[derive(Clone)]
struct Conf {
    mode: String,
    tag: String,
    sleep_ms: u64,
    forward_to: String,
    hang_after: Option<u64>,
    record: Option<std::path::PathBuf>,
}

fn var(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

fn num(key: &str, default: u64) -> u64 {
    var(key, "").parse().unwrap_or(default)
}

fn main() {
    let prefix = var("CUMULO_PREFIX", "?");
    let conf = Conf {
        mode: var("TS_MODE", "echo"),
        tag: var("TS_TAG", &prefix),
        sleep_ms: num("TS_SLEEP_MS", 0),
        forward_to: var("TS_FORWARD_TO", ""),
        hang_after: var("TS_HANG_AFTER", "").parse().ok(),
        record: std::env::var_os("TS_RECORD").map(Into::into),
    };
    match conf.mode.as_str() {
        "exit" => {
            eprintln!("test_service: exiting at start as asked");
            std::process::exit(num("TS_EXIT_CODE", 1) as i32);
        }
        "noconnect" => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        _ => {}
    }
    std::thread::sleep(Duration::from_millis(num("TS_START_DELAY_MS", 0)));
    let patterns: Vec<String> = var("TS_PATTERNS", "*").split(',').map(str::to_string).collect();
    let window = num("TS_WINDOW", 1) as u32;
    let threads = num("CUMULO_THREAD_COUNT", 1).max(1) as u32;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (conf, patterns) = (conf.clone(), patterns.clone());
            std::thread::spawn(move || serve(t, window, &patterns, conf))
        })
        .collect();
    let mut code = 0;
    for h in handles {
        if let Ok(Err(e)) | Err(e) = h.join().map_err(|_| cumulo::Error::Protocol("thread panicked".into())) {
            eprintln!("test_service: {e}");
            code = 1;
        }
    }
    std::process::exit(code);
}

fn serve(thread: u32, window: u32, patterns: &[String], conf: Conf) -> cumulo::Result<()> {
    let mut options = Options { window, ..Options::from_env(thread)? };
    if let Ok(socket) = std::env::var("TS_SOCKET") {
        options.socket = socket;
    }
    let mut api = Api::connect(options)?;
    for p in patterns {
        let conf = conf.clone();
        api.subscribe(p, move |api, req| handle(api, req, &conf, thread))?;
    }
    println!(
        "ts-ready tag={} process={} thread={thread} instance={} pid={}",
        conf.tag,
        api.process_index,
        api.instance_id,
        std::process::id()
    );
    while api.poll(None)? {}
    Ok(())
}

fn handle(api: &mut Api, req: &Request<'_>, conf: &Conf, thread: u32) -> HandlerResult {
    let n = next_seq();
    if conf.hang_after.is_some_and(|h| n > h) {
        hang();
    }
    let body = req.request;
    if let Some(path) = &conf.record {
        record(path, body);
    }
    if let Some(ms) = std::str::from_utf8(body).ok().and_then(|b| b.strip_prefix("sleep:")).and_then(|m| m.parse().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
    match body {
        b"crash" => {
            // SAFETY: kill(2) on our own pid: an abrupt death, as from the OOM killer.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
        b"fail" => return Err("failing as asked".into()),
        b"panic" => panic!("panicking as asked"),
        _ => {}
    }
    match conf.mode.as_str() {
        "sleep" => std::thread::sleep(Duration::from_millis(conf.sleep_ms)),
        "hang" => hang(),
        "error" => return Err(format!("{} always fails", conf.tag).into()),
        "forward" => {
            std::thread::sleep(Duration::from_millis(conf.sleep_ms));
            return Ok(Answer::Forward {
                name: conf.forward_to.clone(),
                info: req.request_info.to_vec(),
                body: body.to_vec(),
                timeout: 0,
                priority: None,
            });
        }
        _ => {}
    }
    let info = cumulo::info::encode(&[
        ("tag", conf.tag.clone()),
        ("pid", std::process::id().to_string()),
        ("process", api.process_index.to_string()),
        ("thread", thread.to_string()),
        ("instance", api.instance_id.to_string()),
        ("process_count", api.process_count.to_string()),
        ("thread_count", api.thread_count.to_string()),
        ("name", req.name.to_string()),
        ("pattern", req.pattern.to_string()),
        ("timeout", req.timeout.to_string()),
        ("priority", req.priority.to_string()),
        ("sync", (req.sync as u8).to_string()),
        ("source", req.source.to_string()),
        ("seq", n.to_string()),
    ]);
    if let Some(n) =
        std::str::from_utf8(body).ok().and_then(|b| b.strip_prefix("big:")).and_then(|n| n.parse::<usize>().ok())
    {
        return Ok(Answer::with_info(info, vec![b'x'; n]));
    }
    Ok(Answer::with_info(info, body))
}

/// Appends `body` and a newline in one write(2): O_APPEND keeps lines whole
/// across processes.
fn record(path: &std::path::Path, body: &[u8]) {
    use std::io::Write;
    let mut line = body.to_vec();
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).expect("open TS_RECORD");
    f.write_all(&line).expect("write TS_RECORD");
}

/// Stops answering but keeps the connection: a handler stuck forever.
fn hang() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

thread_local! {
    // One instance per thread, so a per-thread count is a per-instance one.
    static SEQ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Requests this instance (thread) has received, this one included.
fn next_seq() -> u64 {
    SEQ.with(|s| {
        s.set(s.get() + 1);
        s.get()
    })
}
