//! The trace context a handler's outgoing requests inherit (PROTOCOL.md
//! 5.1): while a handler runs for a request R, a send_sync, send_async,
//! mcast_async or forward whose request_info has no `traceparent` gets R's
//! `traceparent` (and `tracestate`) appended. One `Api` handles one request
//! at a time (requests that arrive during a handler's own waits are queued
//! for `poll`), so the context is the `Api`'s own, set and cleared around
//! each handler.

use cumulo_proto::info;

const TRACEPARENT: &[u8] = b"traceparent";
const TRACESTATE: &[u8] = b"tracestate";

#[derive(Default)]
pub(crate) struct TraceContext {
    /// R's pairs, encoded as they are appended; empty outside a handler and
    /// for a request without `traceparent`.
    pairs: Vec<u8>,
    /// The request_info of an outgoing call with the pairs appended, reused.
    joined: Vec<u8>,
}

impl TraceContext {
    /// A handler starts for a request with this request_info.
    pub(crate) fn enter(&mut self, request_info: &[u8]) {
        self.pairs.clear();
        if request_info.is_empty() {
            return;
        }
        let (mut parent, mut state) = (None, None);
        for pair in info::parse(request_info) {
            // A malformed request_info passes nothing on.
            let Ok((key, value)) = pair else { return };
            match key {
                TRACEPARENT if parent.is_none() => parent = Some(value),
                TRACESTATE if state.is_none() => state = Some(value),
                _ => {}
            }
        }
        if let Some(parent) = parent {
            info::push(&mut self.pairs, TRACEPARENT, parent);
            if let Some(state) = state {
                info::push(&mut self.pairs, TRACESTATE, state);
            }
        }
    }

    /// The handler has returned.
    pub(crate) fn leave(&mut self) {
        self.pairs.clear();
    }

    /// The request_info an outgoing call sends: `given`, or `given` with R's
    /// context appended when it names no `traceparent` of its own.
    pub(crate) fn apply<'a>(&'a mut self, given: &'a [u8]) -> &'a [u8] {
        if self.pairs.is_empty() || has_traceparent(given) {
            return given;
        }
        self.joined.clear();
        self.joined.extend_from_slice(given);
        self.joined.extend_from_slice(&self.pairs);
        &self.joined
    }
}

/// A malformed buffer counts as having one: it is sent as given, and the
/// core refuses it with its reason.
fn has_traceparent(given: &[u8]) -> bool {
    info::parse(given).any(|pair| pair.map_or(true, |(key, _)| key == TRACEPARENT))
}
