//! Unmanaged client: polyglot_client SOCKET NAME HEX_BODY [sync|async]
//!
//! Prints the hex response_info, a newline and the response body; on an
//! error status prints its name, a newline and the message, and exits 3.

use cumulo::{Api, Error, Options, Response, SendOptions};
use std::io::Write;
use std::time::Duration;

/// How long past the core's own timeout the client waits for an async
/// answer, ms: the core always answers (TIMEOUT at the latest).
const ASYNC_GRACE_MS: u64 = 5000;

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn call(api: &mut Api, name: &str, body: &[u8], mode: &str) -> cumulo::Result<Response> {
    if mode != "async" {
        return api.send_sync(name, b"", body, SendOptions::default());
    }
    let tid = api.send_async(name, b"", body, SendOptions::default());
    let wait = Duration::from_millis(api.timeout_async as u64 + ASYNC_GRACE_MS);
    match api.recv_async(Some(tid), wait)? {
        Some((_, r)) => r,
        None => Err(Error::Protocol("no answer from the core".into())),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(socket), Some(name), Some(body)) = (args.get(1), args.get(2), args.get(3).and_then(|h| unhex(h))) else {
        eprintln!("usage: polyglot_client SOCKET NAME HEX_BODY [sync|async]");
        std::process::exit(2);
    };
    let mode = args.get(4).map_or("sync", String::as_str);
    let result = Api::connect(Options::unmanaged(socket.as_str(), "/client/rust/"))
        .and_then(|mut api| call(&mut api, name, &body, mode));
    let mut out = std::io::stdout().lock();
    match result {
        Ok(r) => {
            out.write_all(format!("{}\n", hex(&r.info)).as_bytes()).unwrap();
            out.write_all(&r.body).unwrap();
        }
        Err(Error::Status { status, message }) => {
            out.write_all(format!("{}\n{message}", status.name()).as_bytes()).unwrap();
            out.flush().unwrap();
            std::process::exit(3);
        }
        Err(e) => {
            eprintln!("polyglot_client: {e}");
            std::process::exit(1);
        }
    }
}
