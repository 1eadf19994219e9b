//! The router's one error type: why it refused an operation (a HELLO, a
//! subscription, a frame), as the status the protocol answers with and a
//! reason for a person.

use cumulo_proto::Status;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteError {
    /// What the instance (or the SDK's caller) is told.
    pub status: Status,
    /// Why, in words: the message of the error frame and of the log line.
    pub why: String,
}

impl RouteError {
    pub fn new(status: Status, why: impl Into<String>) -> RouteError {
        RouteError { status, why: why.into() }
    }
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.why)
    }
}

impl std::error::Error for RouteError {}

/// Services built on the core see the router's refusals as the service
/// API's error.
impl From<RouteError> for cumulo_service::ServiceError {
    fn from(e: RouteError) -> cumulo_service::ServiceError {
        cumulo_service::ServiceError::new(e.status, e.why)
    }
}
