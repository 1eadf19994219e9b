//! Why an outgoing request failed: one kind per cause a caller may act on
//! differently, and a sentence naming the host and the step.

use std::fmt;

/// The cause of a failure, as the `http_client_error` key names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request itself is unusable: no URL, a bad URL, a header that
    /// HTTP cannot carry, an unknown method. Never sent.
    BadRequest,
    /// The host name does not resolve.
    Dns,
    /// No TCP connection (refused, unreachable).
    Connect,
    /// The TLS handshake failed, a certificate not trusted included.
    Tls,
    /// The request's deadline passed (connecting, or waiting for the
    /// answer's head or body).
    Timeout,
    /// The answer's body is over `max_response_bytes` (or the core's frame).
    TooLarge,
    /// The server closed or reset the connection before the whole answer.
    Reset,
    /// The server's answer is not valid HTTP/1.
    Protocol,
    /// More redirects than the request allows.
    Redirects,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::BadRequest,
        ErrorKind::Dns,
        ErrorKind::Connect,
        ErrorKind::Tls,
        ErrorKind::Timeout,
        ErrorKind::TooLarge,
        ErrorKind::Reset,
        ErrorKind::Protocol,
        ErrorKind::Redirects,
    ];

    /// The value of `http_client_error` in response_info.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Dns => "dns",
            ErrorKind::Connect => "connect",
            ErrorKind::Tls => "tls",
            ErrorKind::Timeout => "timeout",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::Reset => "reset",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Redirects => "redirects",
        }
    }

    /// The HTTP status answered for it, as a proxy would: the caller's
    /// mistake 400, the deadline 504, anything the far side did 502.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::BadRequest => 400,
            ErrorKind::Timeout => 504,
            _ => 502,
        }
    }

    pub(crate) fn index(self) -> usize {
        ErrorKind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }
}

/// A failed request: its kind and what happened, for the answer's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    why: String,
}

impl Error {
    pub fn new(kind: ErrorKind, why: impl Into<String>) -> Error {
        Error { kind, why: why.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn why(&self) -> &str {
        &self.why
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.why)
    }
}

impl std::error::Error for Error {}
