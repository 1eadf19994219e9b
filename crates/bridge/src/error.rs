use std::fmt;

/// Why a bridge refused a message or closed a connection. The peer reads
/// it as its last message, `error: <reason>` (framed as the connection
/// frames, or one datagram), and it names the counter it adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeError {
    /// A line, a length prefix or a datagram over `max_message` bytes.
    TooLong { max: usize },
    /// A length prefix of zero (`framing = "length"`).
    ZeroLength,
    /// The peer closed in the middle of a length-framed message.
    Truncated,
    /// The bridge already holds `max_connections` connections.
    TooManyConnections,
    /// No whole message for `idle_timeout_ms`, nothing in flight.
    Idle,
    /// The peer did not take its answers for `idle_timeout_ms`.
    SlowReader,
}

impl BridgeError {
    /// The `kind` label of `cumulo_bridge_errors_total`.
    pub fn kind(self) -> &'static str {
        match self {
            BridgeError::TooLong { .. } => "too_long",
            BridgeError::ZeroLength => "zero_length",
            BridgeError::Truncated => "truncated",
            BridgeError::TooManyConnections => "connection_limit",
            BridgeError::Idle => "idle",
            BridgeError::SlowReader => "slow_reader",
        }
    }

    /// The message the peer gets before the close.
    pub fn message(self) -> Vec<u8> {
        format!("error: {self}").into_bytes()
    }
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::TooLong { max } => write!(f, "message over max_message ({max} bytes)"),
            BridgeError::ZeroLength => f.write_str("zero-length message"),
            BridgeError::Truncated => f.write_str("connection closed inside a message"),
            BridgeError::TooManyConnections => f.write_str("too many connections"),
            BridgeError::Idle => f.write_str("idle timeout"),
            BridgeError::SlowReader => f.write_str("answers not read in time"),
        }
    }
}

impl std::error::Error for BridgeError {}
