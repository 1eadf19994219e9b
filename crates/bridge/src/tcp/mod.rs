//! `internal = "tcp"`: a listener whose connections' messages become
//! requests (`connection.rs`). This module accepts, counts, and refuses
//! connections over `max_connections`.

mod connection;

use crate::framing::Framing;
use crate::report::{BridgeReport, Counters, Slot};
use crate::settings::TcpSettings;
use crate::BridgeError;
use cumulo_service::ServiceApi;
use std::rc::Rc;
use std::time::Duration;
use tokio::task::JoinSet;

/// How long the accept loop pauses after a failed accept (out of file
/// descriptors, most often), rather than spinning on it.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

pub struct Tcp {
    settings: TcpSettings,
}

impl Tcp {
    pub fn from_settings(table: &toml::Table) -> Result<Tcp, String> {
        Ok(Tcp { settings: TcpSettings::from_settings(table)? })
    }

    /// Runs one instance until the core stops it; its connections close
    /// with it.
    pub async fn run<A: ServiceApi + 'static>(self, api: A) {
        let mut s = self.settings;
        s.common.cap_max_message("tcp", api.max_request());
        let listener = match crate::listen::tcp(s.common.address) {
            Ok(l) => l,
            Err(e) => return tracing::error!("tcp: {}: cannot listen on {}: {e}", api.prefix(), s.common.address),
        };
        tracing::info!("tcp: {} listening on {}, sending to {}", api.prefix(), s.common.address, s.common.dest);
        let counters = Rc::new(Counters::default());
        api.report(Rc::new(BridgeReport {
            protocol: "tcp",
            prefix: api.prefix().to_string(),
            address: s.common.address.to_string(),
            dest: s.common.dest.clone(),
            slot: Slot::take(api.prefix()),
            counters: counters.clone(),
        }));
        let shared = Rc::new(Shared { api, settings: s, counters });
        // Dropped with this future (the core stops the instance): every
        // connection task is aborted with it.
        let mut connections = JoinSet::new();
        let stopped = crate::stopped(&shared.api);
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = &mut stopped => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let c = &shared.counters;
                        if c.open.get() >= shared.settings.max_connections as u64 {
                            Counters::add(&c.refused);
                            c.error(BridgeError::TooManyConnections.kind());
                            refuse(stream, shared.settings.framing);
                            continue;
                        }
                        Counters::add(&c.accepted);
                        c.open.set(c.open.get() + 1);
                        connections.spawn_local(connection::serve(shared.clone(), stream, peer));
                    }
                    Err(e) => {
                        tracing::warn!("tcp: {}: accept failed: {e}", shared.api.prefix());
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                },
                Some(_) = connections.join_next() => {}
            }
        }
    }
}

/// What every connection of an instance reads.
struct Shared<A> {
    api: A,
    settings: TcpSettings,
    counters: Rc<Counters>,
}

/// Tells a connection over the limit why, without waiting on it: the
/// message fits in a fresh socket's send buffer. Then closes it.
fn refuse(stream: tokio::net::TcpStream, framing: Framing) {
    let mut out = Vec::new();
    framing.encode(&BridgeError::TooManyConnections.message(), &mut out);
    let _ = stream.try_write(&out);
    if let Ok(std) = stream.into_std() {
        let _ = std.shutdown(std::net::Shutdown::Write);
    }
}
