//! Internal services: services that run inside the core, on its event loop,
//! behind one trait and with the same calls as external instances
//! (subscribe, send_async, send_sync, mcast_async, recv_async, return,
//! forward). The HTTP gateway and the load generator are built on it.

mod echo;
#[cfg(test)]
mod gateway_tests;
/// The gateway's entry points for fuzz targets and tests (see `crate::fuzzing`).
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod http;
pub mod settings;

pub use cumulo_gateway::share_ports_across_shards;
pub use cumulo_gateway::websocket_table;
pub use cumulo_node::api::{InternalApi, InternalService};

use std::future::Future;
use std::pin::Pin;

/// The services that are crates of their own see the core only through the
/// service API: each one's `run(api)` is generic over `ServiceApi`, which
/// `InternalApi` implements. One adapter each makes it an `InternalService`.
macro_rules! service_crates {
    ($($(#[$doc:meta])* $name:ident($inner:ty);)*) => {$(
        $(#[$doc])*
        struct $name($inner);

        impl InternalService for $name {
            fn run(self: Box<Self>, api: InternalApi) -> Pin<Box<dyn Future<Output = ()>>> {
                Box::pin(self.0.run(api))
            }
        }
    )*};
}

service_crates! {
    /// The tcp bridge (crates/bridge).
    TcpBridge(cumulo_bridge::Tcp);
    /// The udp bridge (crates/bridge).
    UdpBridge(cumulo_bridge::Udp);
    /// The cron service (crates/cron).
    Cron(cumulo_cron::Cron);
    /// The HTTP gateway (crates/gateway).
    Http(cumulo_gateway::HttpGateway);
    /// The filesystem service (crates/filesystem).
    Filesystem(cumulo_filesystem::Filesystem);
    /// Outgoing HTTP(S) requests by name (crates/http-client).
    HttpClient(cumulo_http_client::HttpClient);
    /// Hosts watched, their state served by name (crates/health-check).
    HealthCheck(cumulo_health_check::HealthCheck);
    /// Misbehaves on purpose on a share of requests (crates/chaos).
    Chaos(cumulo_chaos::Chaos);
    /// The load generator as a service (crates/loadgen).
    RequestRate(cumulo_loadgen::RequestRate);
    /// The durable queue (crates/queue).
    Queue(cumulo_queue::Queue);
    /// The durable queue on JetStream (crates/queue-jetstream), on the
    /// cloud's NATS.
    JetStreamQueue(cumulo_queue_jetstream::JetStreamQueue);
}

/// The `[cluster]` section as the JetStream queue takes it, set once when
/// the core starts (no cluster: never set).
static CLUSTER: std::sync::OnceLock<cumulo_queue_jetstream::Connect> = std::sync::OnceLock::new();

/// Keeps the core's `[cluster]` section (and this node's name) for the
/// internal services that use the cloud's NATS. Called once, at start.
pub fn set_cluster(c: &cumulo_config::cluster::ClusterConfig, node: &str) {
    let _ = CLUSTER.set(cumulo_queue_jetstream::Connect {
        servers: c.servers.clone(),
        cloud: c.name.clone(),
        node: node.to_string(),
        user: c.user.clone(),
        password: c.password.clone(),
        token: c.token.clone(),
        creds_file: c.creds_file.clone(),
        tls_required: c.tls_required,
        tls_ca_file: c.tls_ca_file.clone(),
        tls_cert_file: c.tls_cert_file.clone(),
        tls_key_file: c.tls_key_file.clone(),
    });
}

/// Creates one instance of the internal service `name` from its settings.
pub fn create(name: &str, settings: &toml::Table) -> Result<Box<dyn InternalService>, String> {
    match name {
        "chaos" => Ok(Box::new(Chaos(cumulo_chaos::Chaos::from_settings(settings)?))),
        "cron" => Ok(Box::new(Cron(cumulo_cron::Cron::from_settings(settings)?))),
        "echo" => Ok(Box::new(echo::Echo::from_settings(settings)?)),
        "filesystem" => Ok(Box::new(Filesystem(cumulo_filesystem::Filesystem::from_settings(settings)?))),
        "health_check" => Ok(Box::new(HealthCheck(cumulo_health_check::HealthCheck::from_settings(settings)?))),
        "http" => Ok(Box::new(Http(cumulo_gateway::HttpGateway::from_settings(settings)?))),
        "http_client" => Ok(Box::new(HttpClient(cumulo_http_client::HttpClient::from_settings(settings)?))),
        "request_rate" => Ok(Box::new(RequestRate(cumulo_loadgen::RequestRate::from_settings(settings)?))),
        "queue" if settings::is_jetstream_queue(settings) => Ok(Box::new(JetStreamQueue(
            cumulo_queue_jetstream::JetStreamQueue::from_settings(settings, CLUSTER.get().cloned())?,
        ))),
        "queue" => Ok(Box::new(Queue(cumulo_queue::Queue::from_settings(settings)?))),
        "tcp" => Ok(Box::new(TcpBridge(cumulo_bridge::Tcp::from_settings(settings)?))),
        "udp" => Ok(Box::new(UdpBridge(cumulo_bridge::Udp::from_settings(settings)?))),
        other => Err(format!("unknown internal service '{other}' (known: {})", settings::KNOWN.join(", "))),
    }
}
