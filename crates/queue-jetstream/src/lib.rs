//! The `queue` internal service on JetStream (`backend = "jetstream"`): a
//! request sent to `<prefix><name>` is published to a work-queue stream on
//! the cloud's NATS, acknowledged once the stream has stored it (the
//! PubAck), then delivered to `/<name>` at least once by whichever node
//! running the same queue pulls it from the stream's durable consumer.
//! The checks, verdicts and request_info are the file backend's
//! (`cumulo_queue::shared`), so both answer alike. docs/QUEUE.md is the
//! user's guide; GUARANTEES.md says what a PubAck promises.
//!
//! Layout: `record` (what a stream message holds), `service` (the
//! connection, the stream and consumer, intake, delivery, answers across
//! nodes), `report` (`/v1/queues`, metrics, dead letters, replay, purge).
//!
//! It sees the core only through `cumulo-service`; its manifest does not
//! list the core (`core/tests/architecture.rs` checks the graph):
//!
//! ```compile_fail
//! use cumulo_core::state::Core;
//! ```
#![deny(unsafe_code)]

mod record;
mod report;
mod service;

use cumulo_queue::{Backend, Settings};
use std::path::PathBuf;

/// How to reach the cloud's NATS: the core's `[cluster]` section, as the
/// core hands it over (this crate does not know the core's types).
#[derive(Debug, Clone, Default)]
pub struct Connect {
    pub servers: Vec<String>,
    /// The cloud's name (`cluster.name`): the first token after `cumulo.`
    /// of every subject, and part of the default stream name.
    pub cloud: String,
    /// This node's name, for the connection's name and logs.
    pub node: String,
    pub user: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub creds_file: Option<PathBuf>,
    pub tls_required: bool,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
}

/// The names a queue uses on NATS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The work-queue stream: `settings.stream`, else
    /// `CUMULO_<cloud>_<prefix>` (see [`Names::new`]).
    pub stream: String,
    /// Its one subject: `cumulo.<cloud>.queue.<stream>`. The cluster's own
    /// subjects are `cumulo.<cloud>.ctl` and `cumulo.<cloud>.node.<node>`:
    /// the third token tells them apart.
    pub subject: String,
    /// Dead letters kept for replay: `<stream>_DEAD`, limits retention.
    pub dead_stream: String,
    /// `cumulo.<cloud>.queue.<stream>.dead`.
    pub dead_subject: String,
    /// Answers for a waiting sender on another node (core NATS, not
    /// stored): `cumulo.<cloud>.queue.<stream>.answer.<instance>`.
    pub answers: String,
}

impl Names {
    /// The names of the queue at `prefix` of `cloud`. A derived stream name
    /// keeps letters, digits, `-` and `_` of the cloud and the prefix, the
    /// rest becomes `_`; when that changed anything, 8 hex digits of a hash
    /// of the exact pair follow, so that two prefixes never share a stream.
    pub fn new(cloud: &str, prefix: &str, stream: Option<&str>) -> Names {
        let stream = match stream {
            Some(s) => s.to_string(),
            None => {
                let clean = |s: &str| -> String {
                    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
                };
                let p = prefix.trim_matches('/');
                let (c, pc) = (clean(cloud), clean(p));
                let mut name = format!("CUMULO_{c}_{pc}");
                if c != cloud || pc != p || p.is_empty() {
                    name.push_str(&format!("_{:08x}", fnv32(format!("{cloud}\0{prefix}").as_bytes())));
                }
                name
            }
        };
        let cloud_token: String = cloud
            .chars()
            .map(|c| if c == '.' || c == '*' || c == '>' || c.is_whitespace() { '_' } else { c })
            .collect();
        let subject = format!("cumulo.{cloud_token}.queue.{stream}");
        Names {
            dead_stream: format!("{stream}_DEAD"),
            dead_subject: format!("{subject}.dead"),
            answers: format!("{subject}.answer"),
            subject,
            stream,
        }
    }
}

fn fnv32(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}

/// One queue on JetStream: its settings, checked, and how to reach NATS;
/// nothing is connected until it runs.
pub struct JetStreamQueue {
    settings: Settings,
    connect: Connect,
}

impl JetStreamQueue {
    /// Checks the settings (they must say `backend = "jetstream"`); `connect`
    /// is the core's `[cluster]` section, `None` without one.
    pub fn from_settings(t: &toml::Table, connect: Option<Connect>) -> Result<JetStreamQueue, String> {
        let settings = Settings::parse(t)?;
        if !matches!(settings.backend, Backend::JetStream { .. }) {
            return Err("queue: this is the jetstream backend; settings.backend says otherwise".into());
        }
        let connect = connect.ok_or_else(|| {
            "queue: backend = \"jetstream\" needs the [cluster] section (cluster.servers: the cloud's NATS)".to_string()
        })?;
        if connect.servers.is_empty() {
            return Err("queue: backend = \"jetstream\" needs cluster.servers (the cloud's NATS)".into());
        }
        Ok(JetStreamQueue { settings, connect })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Runs the queue until the future is dropped (the service stops).
    pub async fn run<A: cumulo_service::ServiceApi + 'static>(self, api: A) {
        service::run(self.settings, self.connect, api).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_apart_from_the_clusters_subjects() {
        let n = Names::new("prod", "/queue/", None);
        assert_eq!(n.stream, "CUMULO_prod_queue");
        assert_eq!(n.subject, "cumulo.prod.queue.CUMULO_prod_queue");
        assert_eq!(n.dead_stream, "CUMULO_prod_queue_DEAD");
        assert_eq!(n.dead_subject, "cumulo.prod.queue.CUMULO_prod_queue.dead");
        // The cluster: cumulo.<cloud>.ctl and cumulo.<cloud>.node.<node>.
        assert!(!n.subject.starts_with("cumulo.prod.ctl") && !n.subject.starts_with("cumulo.prod.node."));
        let a = Names::new("prod", "/jobs/a-b/", None);
        let b = Names::new("prod", "/jobs/a_b/", None);
        assert_ne!(a.stream, b.stream);
        assert!(a.stream.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-'), "{}", a.stream);
        assert_eq!(Names::new("prod", "/q/", Some("ORDERS")).subject, "cumulo.prod.queue.ORDERS");
    }

    #[test]
    fn a_jetstream_queue_needs_the_cluster_section() {
        let t: toml::Table = toml::from_str("backend = \"jetstream\"").unwrap();
        let e = JetStreamQueue::from_settings(&t, None).err().unwrap();
        assert!(e.contains("cluster.servers"), "{e}");
        let c = Connect { servers: vec!["nats://127.0.0.1:4222".into()], ..Default::default() };
        assert!(JetStreamQueue::from_settings(&t, Some(c.clone())).is_ok());
        let file: toml::Table = toml::from_str("dir = \"/tmp/x\"").unwrap();
        assert!(JetStreamQueue::from_settings(&file, Some(c)).is_err());
    }
}
