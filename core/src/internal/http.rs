//! The HTTP gateway's entry points for the fuzz targets and tests, in
//! front of a real core: the gateway (crate cumulo-gateway) served as an
//! internal instance of `core`.

use super::InternalApi;
use cumulo_router::Shared;
use std::rc::Rc;

pub use cumulo_gateway::fuzzing::{map_request, map_response, Mapped};

/// Serves one connection over `stream` as a gateway with `settings`.
pub async fn serve_connection<S>(core: &Shared, settings: &toml::Table, stream: S) -> Result<(), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let api = InternalApi::connect(core, "/http/", Rc::default(), Rc::default(), 0, 0, 1, 1).map_err(|e| e.why)?;
    cumulo_gateway::fuzzing::serve_connection(api, settings, stream).await
}
