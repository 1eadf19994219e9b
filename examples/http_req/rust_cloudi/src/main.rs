//! http_req written against CloudI's own Rust API (the `cloudi` crate), run
//! unchanged by cumulo (`protocol = "cloudi"`, docs/CLOUDI.md). Subscribes
//! `rust_cloudi.xml/get` and answers exactly like `examples/http_req/rust`.
//! One CloudI API per thread, as many as CLOUDI_API_INIT_THREAD_COUNT.

use cloudi::{Priority, RequestType, Response, Source, Timeout, TransId, API};

const CONTENT_TYPE: &[u8] = b"content-type\0text/xml; charset=utf-8\0";

/// The integer under key `value` (first occurrence) of well-formed key/value
/// data (each key and value NUL-terminated). Stricter than
/// `cloudi::info_key_value_parse`: malformed data has no value.
fn parse_value(body: &[u8]) -> Option<i64> {
    let fields = body.strip_suffix(b"\0")?;
    let fields: Vec<&[u8]> = fields.split(|b| *b == 0).collect();
    if !fields.len().is_multiple_of(2) {
        return None;
    }
    let (_, v) = fields.chunks_exact(2).map(|kv| (kv[0], kv[1])).find(|(k, _)| *k == b"value")?;
    std::str::from_utf8(v).ok()?.parse::<i64>().ok()
}

fn answer(body: &[u8]) -> Vec<u8> {
    match parse_value(body) {
        Some(n) => format!("<http_test><value>{n}</value></http_test>").into_bytes(),
        None => b"<http_test><error>no value specified</error></http_test>".to_vec(),
    }
}

#[allow(clippy::too_many_arguments, reason = "the signature of CloudI's request callback")]
fn request(
    _request_type: &RequestType,
    _name: &str,
    _pattern: &str,
    _request_info: &[u8],
    request: &[u8],
    _timeout: Timeout,
    _priority: Priority,
    _trans_id: &TransId,
    _source: &Source,
    _state: &mut (),
    _api: &mut API<'_, ()>,
) -> Response {
    Response::ResponseInfo(CONTENT_TYPE.to_vec(), answer(request))
}

fn thread(thread_index: u32) -> cloudi::Result<()> {
    let mut state = ();
    let mut api = API::new(thread_index, &mut state)?;
    api.subscribe("rust_cloudi.xml/get", request)?;
    api.poll(-1)?; // returns when the core says to terminate
    Ok(())
}

fn main() {
    let count = match cloudi::thread_count() {
        Ok(n) => n,
        Err(_) => {
            eprintln!("http_req_cloudi: not started by a CloudI-protocol core");
            std::process::exit(1);
        }
    };
    let threads: Vec<_> = (0..count).map(|i| std::thread::spawn(move || thread(i))).collect();
    let mut failed = false;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("http_req_cloudi: {e}");
                failed = true;
            }
            Err(_) => {
                eprintln!("http_req_cloudi: a thread panicked");
                failed = true;
            }
        }
    }
    std::process::exit(i32::from(failed));
}
