//! Why the core stopped reading a connection: a type, so that logging and
//! removing the instance decide by its kind instead of matching the text.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed the connection; with the error if its socket failed.
    ByPeer(Option<String>),
    /// The core closed it (shutdown, an instance found hung).
    ByCore,
    /// The peer sent a frame the core refuses; the `ERROR` it was sent
    /// says the same.
    Protocol(String),
    /// The peer read too slowly: more than `max_outbox` bytes waited for it.
    SlowConsumer { max_outbox: usize },
}

impl CloseReason {
    /// A close the peer chose: not worth a warning.
    pub fn by_peer(&self) -> bool {
        matches!(self, CloseReason::ByPeer(_))
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::ByPeer(None) => f.write_str("closed by the peer"),
            CloseReason::ByPeer(Some(e)) => write!(f, "closed by the peer: {e}"),
            CloseReason::ByCore => f.write_str("closed by the core"),
            CloseReason::Protocol(why) => f.write_str(why),
            CloseReason::SlowConsumer { max_outbox } => {
                write!(f, "slow consumer: more than {max_outbox} bytes waiting to be read")
            }
        }
    }
}
