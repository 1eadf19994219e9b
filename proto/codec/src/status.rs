//! Status codes (PROTOCOL.md 2.3).

use std::fmt;

/// A status code carried by `RESPONSE`, `RETURN`, `REPLY` and `ERROR`.
/// Unknown codes are kept as `Other` so newer peers never break older ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ok,
    Timeout,
    NoService,
    QueueFull,
    Crashed,
    Malformed,
    ShuttingDown,
    ServiceError,
    TooLarge,
    InvalidArgument,
    UnsupportedVersion,
    Unauthorized,
    Protocol,
    Unavailable,
    Other(u16),
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 0,
            Status::Timeout => 1,
            Status::NoService => 2,
            Status::QueueFull => 3,
            Status::Crashed => 4,
            Status::Malformed => 5,
            Status::ShuttingDown => 6,
            Status::ServiceError => 7,
            Status::TooLarge => 8,
            Status::InvalidArgument => 9,
            Status::UnsupportedVersion => 10,
            Status::Unauthorized => 11,
            Status::Protocol => 12,
            Status::Unavailable => 13,
            Status::Other(c) => c,
        }
    }

    pub fn from_code(code: u16) -> Status {
        match code {
            0 => Status::Ok,
            1 => Status::Timeout,
            2 => Status::NoService,
            3 => Status::QueueFull,
            4 => Status::Crashed,
            5 => Status::Malformed,
            6 => Status::ShuttingDown,
            7 => Status::ServiceError,
            8 => Status::TooLarge,
            9 => Status::InvalidArgument,
            10 => Status::UnsupportedVersion,
            11 => Status::Unauthorized,
            12 => Status::Protocol,
            13 => Status::Unavailable,
            c => Status::Other(c),
        }
    }

    /// The name used in the spec and in logs (`NO_SERVICE`).
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Timeout => "TIMEOUT",
            Status::NoService => "NO_SERVICE",
            Status::QueueFull => "QUEUE_FULL",
            Status::Crashed => "CRASHED",
            Status::Malformed => "MALFORMED",
            Status::ShuttingDown => "SHUTTING_DOWN",
            Status::ServiceError => "SERVICE_ERROR",
            Status::TooLarge => "TOO_LARGE",
            Status::InvalidArgument => "INVALID_ARGUMENT",
            Status::UnsupportedVersion => "UNSUPPORTED_VERSION",
            Status::Unauthorized => "UNAUTHORIZED",
            Status::Protocol => "PROTOCOL",
            Status::Unavailable => "UNAVAILABLE",
            Status::Other(_) => "UNKNOWN",
        }
    }

    pub fn from_name(name: &str) -> Option<Status> {
        (0..=13).map(Status::from_code).find(|s| s.name() == name)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Other(c) => write!(f, "status {c}"),
            s => f.write_str(s.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_names_are_unique() {
        for code in 0..=20u16 {
            assert_eq!(Status::from_code(code).code(), code);
        }
        for code in 0..=13u16 {
            let s = Status::from_code(code);
            assert_eq!(Status::from_name(s.name()), Some(s));
        }
    }
}
