//! Filing the frames nobody waits for in particular: responses kept for
//! `recv_async`, requests queued for `poll`, PINGs answered, TERMINATE noted.

use crate::api::{status_error, Response};
use crate::error::{Error, Result};
use cumulo_proto::{kind, Frame, TransId, REQUEST_SYNC};
use std::collections::{HashSet, VecDeque};

/// A request copied out of the read buffer, to be handled at the next `poll`.
#[derive(Debug)]
pub(crate) struct OwnedRequest {
    pub name: String,
    pub pattern: String,
    pub info: Vec<u8>,
    pub body: Vec<u8>,
    pub timeout: u32,
    pub priority: i8,
    pub trans_id: TransId,
    pub source: u64,
    pub sync: bool,
}

#[derive(Default)]
pub(crate) struct Inbox {
    /// Requests that arrived while a call waited for something else.
    pub pending: VecDeque<OwnedRequest>,
    /// Responses to async sends, until recv_async takes them.
    pub responses: VecDeque<(TransId, Result<Response>)>,
    /// Requests whose answer is still waited for: sent and not yet
    /// answered, and not given up on. A RESPONSE for any other trans_id
    /// (a send_sync that gave up, a multicast whose MCAST_SENT came after
    /// its caller stopped waiting) has nobody to take it: it is dropped, so
    /// what is kept is only what a call of this instance will collect.
    pub awaited: HashSet<TransId>,
    /// Responses dropped because nobody waited for them.
    pub unsolicited: u64,
    /// The core sent TERMINATE.
    pub terminated: bool,
}

impl Inbox {
    /// Files one decoded frame; a PONG for a PING goes into `wbuf`. An
    /// ERROR from the core (it closes the connection after it) and a frame
    /// the core never sends are errors.
    pub fn file(&mut self, frame: Frame<'_>, wbuf: &mut Vec<u8>) -> Result<()> {
        match frame {
            Frame::Response(r) => {
                let result = if r.status == 0 {
                    Ok(Response { trans_id: r.trans_id, info: r.response_info.to_vec(), body: r.response.to_vec() })
                } else {
                    Err(status_error(r.status, r.response))
                };
                if self.awaited.remove(&r.trans_id) {
                    self.responses.push_back((r.trans_id, result));
                } else {
                    self.unsolicited += 1;
                    // One line for the 1st, 2nd, 4th, 8th, ...: a flood costs a
                    // few lines, not one per frame.
                    if self.unsolicited.is_power_of_two() {
                        eprintln!(
                            "cumulo: dropped a response to {}: nothing waits for it (its caller gave up); {} dropped so far",
                            r.trans_id, self.unsolicited
                        );
                    }
                }
            }
            Frame::Request(r) => self.pending.push_back(OwnedRequest {
                name: r.name.into(),
                pattern: r.pattern.into(),
                info: r.request_info.into(),
                body: r.request.into(),
                timeout: r.timeout,
                priority: r.priority,
                trans_id: r.trans_id,
                source: r.source,
                sync: r.flags & REQUEST_SYNC != 0,
            }),
            Frame::Ping(n) => cumulo_proto::encode_ping(wbuf, kind::PONG, n),
            Frame::Terminate(_) => self.terminated = true,
            Frame::Error(err) => return Err(status_error(err.status, err.message.as_bytes())),
            // Replies and MCAST_SENTs of calls that gave up waiting, and PONGs.
            Frame::Reply(_) | Frame::McastSent(_) | Frame::Pong(_) => {}
            other => {
                return Err(Error::Protocol(format!("unexpected {} from the core", other.type_name())));
            }
        }
        Ok(())
    }
}
