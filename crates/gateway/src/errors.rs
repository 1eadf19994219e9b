//! 5xx answers and `error_detail`. What went wrong behind the gateway (a
//! handler's exception, the shard that held the request) helps on a
//! developer's machine and tells the public about the inside. Either way the
//! body carries a request id; hidden, the body says only the HTTP reason and
//! the whole story is logged under that id, one line per answer.

use super::response::{plain, HttpResponse};
use super::settings::ErrorDetail;
use hyper::StatusCode;
use std::cell::Cell;
use std::hash::BuildHasher;

/// The gateway's answer `text` (one line) with `status`. 4xx answers speak
/// of the client's own request and are passed as they are.
pub fn answer(detail: ErrorDetail, status: StatusCode, text: String) -> HttpResponse {
    if !status.is_server_error() {
        return plain(status, text);
    }
    let id = request_id();
    let text = text.trim_end();
    match detail {
        ErrorDetail::Public => plain(status, format!("{text} (request id {id})\n")),
        ErrorDetail::Hidden => {
            tracing::warn!("http: answered {} (request id {id}): {text}", status.as_u16());
            let reason = status.canonical_reason().unwrap_or("error").to_ascii_lowercase();
            plain(status, format!("{reason} (request id {id})\n"))
        }
    }
}

thread_local! {
    /// A Weyl sequence from a random start per shard, mixed (splitmix64):
    /// ids that do not repeat and do not tell how many requests came before.
    static NEXT: Cell<u64> = Cell::new(std::collections::hash_map::RandomState::new().hash_one(0u64));
}

/// 16 hex digits.
fn request_id() -> String {
    let x = NEXT.with(|n| {
        let x = n.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        n.set(x);
        x
    });
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    format!("{:016x}", z ^ (z >> 31))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Either};

    fn body(r: HttpResponse) -> String {
        let Either::Left(full) = r.into_body() else { panic!("a file body") };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let bytes = rt.block_on(full.collect()).unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn hidden_says_the_reason_and_an_id_public_the_whole_line() {
        let why = "internal server error: the service behind '/a/get' failed: boom\n".to_string();
        let hidden = body(answer(ErrorDetail::Hidden, StatusCode::INTERNAL_SERVER_ERROR, why.clone()));
        assert!(hidden.starts_with("internal server error (request id "), "{hidden}");
        assert!(!hidden.contains("boom"));
        let public = body(answer(ErrorDetail::Public, StatusCode::INTERNAL_SERVER_ERROR, why));
        assert!(public.starts_with("internal server error: the service behind '/a/get' failed: boom (request id "));
        let not_found = body(answer(ErrorDetail::Hidden, StatusCode::NOT_FOUND, "not found: x\n".into()));
        assert_eq!(not_found, "not found: x\n");
    }

    #[test]
    fn ids_differ() {
        let (a, b) = (request_id(), request_id());
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
    }
}
