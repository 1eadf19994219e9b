//! `internal = "udp"`: each datagram is a request; its answer goes back to
//! the sender as one datagram (none for an empty body). At most
//! `max_in_flight` requests wait at once; datagrams beyond are dropped and
//! counted (a UDP sender must cope with loss anyway, and queueing them
//! would only answer them late).

use crate::report::{BridgeReport, Counters, Slot};
use crate::settings::{UdpSettings, MAX_DATAGRAM};
use crate::BridgeError;
use cumulo_service::{SendOptions, ServiceApi};
use std::rc::Rc;
use tokio::task::JoinSet;

pub struct Udp {
    settings: UdpSettings,
}

impl Udp {
    pub fn from_settings(table: &toml::Table) -> Result<Udp, String> {
        Ok(Udp { settings: UdpSettings::from_settings(table)? })
    }

    /// Runs one instance until the core stops it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let mut s = self.settings;
        s.common.cap_max_message("udp", api.max_request());
        let socket = match crate::listen::udp(s.common.address) {
            Ok(socket) => Rc::new(socket),
            Err(e) => return tracing::error!("udp: {}: cannot bind {}: {e}", api.prefix(), s.common.address),
        };
        tracing::info!("udp: {} bound to {}, sending to {}", api.prefix(), s.common.address, s.common.dest);
        let c = Rc::new(Counters::default());
        api.report(Rc::new(BridgeReport {
            protocol: "udp",
            prefix: api.prefix().to_string(),
            address: s.common.address.to_string(),
            dest: s.common.dest.clone(),
            slot: Slot::take(api.prefix()),
            counters: c.clone(),
        }));
        let options =
            SendOptions { timeout_ms: s.common.timeout_ms, priority: s.common.priority, wait_for_service: false };
        // One byte more than the largest message: a longer datagram is
        // seen to be longer (the kernel cuts it to the buffer).
        let mut buf = vec![0u8; s.common.max_message + 1];
        // The requests in flight, each a task that sends its answer back;
        // aborted when this future is dropped (the core stops the instance).
        let mut in_flight = JoinSet::new();
        let stopped = crate::stopped(&api);
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                got = socket.recv_from(&mut buf) => {
                    let Ok((n, peer)) = got else { continue };
                    if n > s.common.max_message {
                        let e = BridgeError::TooLong { max: s.common.max_message };
                        c.error(e.kind());
                        let _ = socket.try_send_to(&e.message(), peer);
                        continue;
                    }
                    while in_flight.try_join_next().is_some() {}
                    if in_flight.len() >= s.max_in_flight {
                        Counters::add(&c.dropped);
                        continue;
                    }
                    Counters::add(&c.messages);
                    let info = crate::connection_info(s.common.send_connection_info, peer);
                    let answer = api.call(&s.common.dest, &info, &buf[..n], options);
                    let (socket, c) = (socket.clone(), c.clone());
                    in_flight.spawn_local(async move {
                        let body = match crate::answer_body(answer.await) {
                            Ok(body) if body.len() as u64 > MAX_DATAGRAM => {
                                c.error("answer_too_long");
                                b"error: answer over a datagram's size".to_vec()
                            }
                            Ok(body) => {
                                Counters::add(&c.answers);
                                body
                            }
                            Err((status, message)) => {
                                c.failed(status);
                                message
                            }
                        };
                        if !body.is_empty() && socket.send_to(&body, peer).await.is_err() {
                            // The network refused it (IPv6 or a smaller MTU path).
                            c.error("send_failed");
                        }
                    });
                }
                Some(_) = in_flight.join_next() => {}
            }
        }
    }
}
