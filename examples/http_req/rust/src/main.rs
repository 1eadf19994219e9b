//! http_req: the service every cumulo SDK implements the same way
//! (docs/SDK_GUIDE.md). Subscribes `rust.xml/get`; answers
//! `<http_test><value>N</value></http_test>` for a `value` key holding an
//! integer, `<http_test><error>no value specified</error></http_test>`
//! otherwise, with an XML content-type in response_info.

use cumulo::{info, Answer, Api, Request};

const CONTENT_TYPE: &[u8] = b"content-type\0text/xml; charset=utf-8\0";

fn answer(req: &Request<'_>) -> Vec<u8> {
    // The whole body must be well-formed key/value data, not just up to `value`.
    let value = info::parse_all(req.request)
        .ok()
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| *k == b"value"))
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<i64>().ok());
    match value {
        Some(n) => format!("<http_test><value>{n}</value></http_test>").into_bytes(),
        None => b"<http_test><error>no value specified</error></http_test>".to_vec(),
    }
}

/// HTTP_REQ_WINDOW: requests the core may deliver at once (default 1); a
/// value that is not a positive integer stops the process.
fn window() -> u32 {
    let Ok(w) = std::env::var("HTTP_REQ_WINDOW") else { return 1 };
    if w.is_empty() {
        return 1;
    }
    match w.parse::<u32>() {
        Ok(n) if n >= 1 && w.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => {
            eprintln!("http_req: HTTP_REQ_WINDOW='{w}' is not a positive integer");
            std::process::exit(2);
        }
    }
}

fn main() {
    let result = cumulo::run_with_window(window(), |api: &mut Api| {
        api.subscribe("rust.xml/get", |_api, req| Ok(Answer::with_info(CONTENT_TYPE, answer(req))))
    });
    if let Err(e) = result {
        eprintln!("http_req: {e}");
        std::process::exit(1);
    }
}
