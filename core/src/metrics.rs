//! Counters of what the core did, kept on the event-loop thread (plain
//! integers, no atomics). They feed the final log line and the metrics
//! endpoint.

#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Requests accepted for routing (multicast copies included).
    pub requests: u64,
    /// Answers routed back to their senders.
    pub responses: u64,
    pub forwards: u64,
    pub timeouts: u64,
    pub no_service: u64,
    pub queue_full: u64,
    /// Requests failed because their instance went away.
    pub crashed: u64,
    /// Answers that arrived after their request had timed out.
    pub late: u64,
    /// Connections closed for frames that broke the protocol.
    pub protocol_errors: u64,
    /// Connections closed because they did not read their frames.
    pub slow_consumers: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "requests {}, responses {}, forwards {}, timeouts {}, no_service {}, queue_full {}, crashed {}, late {}, protocol_errors {}, slow_consumers {}",
            self.requests, self.responses, self.forwards, self.timeouts, self.no_service, self.queue_full,
            self.crashed, self.late, self.protocol_errors, self.slow_consumers
        )
    }
}
