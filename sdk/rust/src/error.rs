//! Errors of the SDK: a status from the core (or the other service), or a
//! failure of the connection itself.

use cumulo_proto::Status;
use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// The core or the receiving service answered with an error status.
    Status { status: Status, message: String },
    /// The connection to the core failed.
    Io(std::io::Error),
    /// The core sent something this SDK cannot accept (or the environment
    /// of a managed instance is missing).
    Protocol(String),
}

impl Error {
    /// The protocol status, if the error carries one.
    pub fn status(&self) -> Option<Status> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Status { status, message } => write!(f, "{status}: {message}"),
            Error::Io(e) => write!(f, "connection to the cumulo core failed: {e}"),
            Error::Protocol(m) => write!(f, "protocol error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
