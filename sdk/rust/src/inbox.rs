//! Filing the frames nobody waits for in particular: responses kept for
//! `recv_async`, requests queued for `poll`, PINGs answered, TERMINATE noted.

use crate::api::{status_error, Response};
use crate::error::{Error, Result};
use cumulo_proto::{kind, Frame, TransId, REQUEST_SYNC};
use std::collections::VecDeque;

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
                self.responses.push_back((r.trans_id, result));
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
