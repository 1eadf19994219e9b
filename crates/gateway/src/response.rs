//! Service answer → HTTP response. On OK, response_info (key/value) may set
//! `status`; every other key becomes a response header; the response is the
//! body. An error status of the request becomes an HTTP error with a
//! plain-text body that says what happened and to which name (a 5xx one
//! as `error_detail` says: errors.rs).

use super::errors;
use super::file_body::FileBody;
use super::settings::ErrorDetail;
use bytes::Bytes;
use cumulo_filesystem::stream::{self as file_stream, Part};
use cumulo_proto::{info, Status};
use cumulo_service::Response;
use http_body_util::{Either, Full};
use hyper::header::{
    HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, TRANSFER_ENCODING,
};
use hyper::StatusCode;

/// The bytes of an answer (or of the filesystem service's cache, handed
/// over uncopied), or an open file streamed in chunks (its large files):
/// crates/filesystem/src/stream.rs.
pub type HttpBody = Either<Full<Bytes>, FileBody>;
pub type HttpResponse = hyper::Response<HttpBody>;

pub fn from_service(answer: Response, name: &str, detail: ErrorDetail) -> HttpResponse {
    if answer.status != Status::Ok {
        return from_error(answer.status, name, &answer.response, detail);
    }
    match with_info(&answer.response_info, answer.response) {
        Ok(r) => r,
        Err(why) => errors::answer(
            detail,
            StatusCode::BAD_GATEWAY,
            format!("bad gateway: the service behind '{name}' answered with malformed response_info: {why}\n"),
        ),
    }
}

fn with_info(response_info: &[u8], body: Vec<u8>) -> Result<HttpResponse, String> {
    let mut resp = hyper::Response::new(Either::Left(Full::new(Bytes::from(body))));
    let mut file_handle = None;
    for pair in info::parse(response_info) {
        let (key, value) = pair.map_err(|e| e.to_string())?;
        if key == b"status" {
            *resp.status_mut() = http_status(value)?;
            continue;
        }
        if key == file_stream::HANDLE_KEY.as_bytes() {
            file_handle = Some(value);
            continue;
        }
        let name = HeaderName::from_bytes(key)
            .map_err(|_| format!("'{}' is not a valid HTTP header name", String::from_utf8_lossy(key)))?;
        // The gateway frames the body itself; a service's idea of its length
        // could only contradict it.
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| format!("the value of header '{name}' is not a valid HTTP header value"))?;
        resp.headers_mut().append(name, value);
    }
    if let Some(handle) = file_handle {
        *resp.body_mut() =
            match file_stream::take(handle).ok_or("it named a file handle that this gateway does not hold")? {
                Part::File(part) => Either::Right(FileBody::new(part)),
                Part::Memory(bytes) => Either::Left(Full::new(bytes)),
            };
    }
    Ok(resp)
}

/// A final status (200 .. 599) written as decimal digits.
fn http_status(value: &[u8]) -> Result<StatusCode, String> {
    let text = std::str::from_utf8(value).unwrap_or("").trim();
    text.parse::<u16>()
        .ok()
        .filter(|c| (200..=599).contains(c))
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| format!("status '{}' is not an HTTP status code 200 .. 599", String::from_utf8_lossy(value)))
}

/// The HTTP status for a request that ended in a cumulo error.
pub fn error_status(status: Status) -> StatusCode {
    match status {
        Status::NoService => StatusCode::NOT_FOUND,
        Status::QueueFull | Status::ShuttingDown | Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Status::Timeout => StatusCode::GATEWAY_TIMEOUT,
        Status::ServiceError => StatusCode::INTERNAL_SERVER_ERROR,
        Status::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        // The gateway's own rules (its dest_list_allow / dest_list_deny).
        Status::Unauthorized => StatusCode::FORBIDDEN,
        // CRASHED, and anything a service should not have answered with.
        _ => StatusCode::BAD_GATEWAY,
    }
}

fn from_error(status: Status, name: &str, message: &[u8], detail: ErrorDetail) -> HttpResponse {
    let message = String::from_utf8_lossy(message);
    let text = match status {
        Status::NoService => {
            format!("not found: no service for '{name}' (no instance subscribes a pattern matching it)\n")
        }
        Status::Timeout => format!("gateway timeout: '{name}' did not answer in time: {message}\n"),
        Status::QueueFull => format!("service unavailable: '{name}' is overloaded: {message}\n"),
        Status::ShuttingDown => format!("service unavailable: '{name}': {message}\n"),
        Status::Unavailable => format!("service unavailable: '{name}': {message}\n"),
        Status::ServiceError => format!("internal server error: the service behind '{name}' failed: {message}\n"),
        Status::Crashed => format!("bad gateway: the service behind '{name}' went away: {message}\n"),
        Status::TooLarge => {
            format!("payload too large: the request or answer for '{name}' is over a size limit: {message}\n")
        }
        Status::Unauthorized => format!("forbidden: this gateway may not call '{name}'\n"),
        other => format!("bad gateway: '{name}' answered with status {}: {message}\n", other.name()),
    };
    let mut resp = errors::answer(detail, error_status(status), text);
    if status == Status::Unavailable {
        // The service exists but has no instance now: tell clients when to
        // come back rather than that the name is wrong (a 404).
        resp.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

/// A plain-text response made by the gateway itself.
pub fn plain(status: StatusCode, text: String) -> HttpResponse {
    let mut resp = hyper::Response::new(Either::Left(Full::new(Bytes::from(text))));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

/// A plain-text response after which the connection is closed: used when
/// the request body was left unread.
pub fn plain_and_close(status: StatusCode, text: String) -> HttpResponse {
    let mut resp = plain(status, text);
    resp.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use cumulo_proto::TransId;

    fn answer(status: Status, info: &[u8], body: &[u8]) -> Response {
        Response { trans_id: TransId::new(1, 1, 1), status, response_info: info.to_vec(), response: body.to_vec() }
    }

    #[test]
    fn status_and_headers_come_from_response_info() {
        let info = info::encode(&[
            ("status", "201"),
            ("Content-Type", "text/xml"),
            ("x-a", "1"),
            ("x-a", "2"),
            ("content-length", "99"),
        ]);
        let r = from_service(answer(Status::Ok, &info, b"<a/>"), "/n/get", ErrorDetail::Public);
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()["content-type"], "text/xml");
        assert_eq!(r.headers().get_all("x-a").iter().count(), 2);
        assert!(r.headers().get("content-length").is_none());
    }

    #[test]
    fn defaults_are_200_and_no_content_type() {
        let r = from_service(answer(Status::Ok, b"", b"x"), "/n/get", ErrorDetail::Public);
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().is_empty());
    }

    #[test]
    fn malformed_response_info_is_502() {
        for bad in [&b"status\0abc\0"[..], b"status\x00102\x00", b"no-terminator", b"bad header\0v\0", b"x\0a\nb\0"] {
            let r = from_service(answer(Status::Ok, bad, b""), "/n/get", ErrorDetail::Public);
            assert_eq!(r.status(), StatusCode::BAD_GATEWAY, "{bad:?}");
        }
    }

    #[test]
    fn errors_map_to_http_statuses() {
        let table = [
            (Status::NoService, 404),
            (Status::QueueFull, 503),
            (Status::ShuttingDown, 503),
            (Status::Timeout, 504),
            (Status::ServiceError, 500),
            (Status::Crashed, 502),
            (Status::TooLarge, 413),
            (Status::Other(99), 502),
        ];
        for (status, http) in table {
            let r = from_service(answer(status, b"", b"why"), "/n/get", ErrorDetail::Public);
            assert_eq!(r.status().as_u16(), http, "{status:?}");
            assert_eq!(r.headers()["content-type"], "text/plain; charset=utf-8");
        }
    }
}
