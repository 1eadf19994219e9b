//! Answers of the admin API: JSON bodies, and errors as
//! `{"code": "...", "message": "..."}` with a matching HTTP status.

use cumulo_node::supervisor::OpError;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{header, Response, StatusCode};

pub type Body = Full<Bytes>;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// The offending field, for validation errors.
    pub field: Option<String>,
    /// Seconds to wait before trying again (`Retry-After`), for a 429.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), field: None, retry_after: None }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A field failed validation: "invalid_service" and where.
    pub fn invalid(field: String, reason: String) -> ApiError {
        let message = if field.is_empty() { reason } else { format!("{field}: {reason}") };
        let field = (!field.is_empty()).then_some(field);
        ApiError { status: StatusCode::BAD_REQUEST, code: "invalid_service", message, field, retry_after: None }
    }

    pub fn into_response(self) -> Response<Body> {
        let mut body = serde_json::json!({ "code": self.code, "message": self.message });
        if let Some(f) = self.field {
            body["field"] = f.into();
        }
        let mut r = json(self.status, &body);
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"cumulo\""));
        }
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(secs));
        }
        r
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> ApiError {
        match e {
            OpError::NotFound(m) => ApiError::not_found(m),
            OpError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            OpError::Invalid { field, reason } => ApiError::invalid(field, reason),
        }
    }
}

pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    with_type(status, "application/json", text)
}

pub fn with_type(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    r
}

/// What a handler returns: a status and a JSON body, or an error.
pub type Answer = Result<(StatusCode, serde_json::Value), ApiError>;
