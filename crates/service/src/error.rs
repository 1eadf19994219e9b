use cumulo_proto::Status;
use std::fmt;

/// Why a call of the service API failed: the status a sender would see, and
/// a sentence for a log line or an answer's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceError {
    status: Status,
    why: String,
}

impl ServiceError {
    pub fn new(status: Status, why: impl Into<String>) -> ServiceError {
        ServiceError { status, why: why.into() }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn why(&self) -> &str {
        &self.why
    }
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.why)
    }
}

impl std::error::Error for ServiceError {}

impl From<(Status, String)> for ServiceError {
    fn from((status, why): (Status, String)) -> ServiceError {
        ServiceError { status, why }
    }
}
