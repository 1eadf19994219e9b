//! `echo`: answers every request with its own request_info and body.
//! Settings: `pattern` (default `"*"`), the pattern it subscribes under its
//! prefix. Useful to check a deployment and as the smallest internal service.

use super::{InternalApi, InternalService};
use cumulo_proto::Status;
use std::future::Future;
use std::pin::Pin;

pub struct Echo {
    pattern: String,
}

impl Echo {
    pub fn from_settings(settings: &toml::Table) -> Result<Echo, String> {
        Ok(Echo { pattern: super::settings::echo_pattern(settings)? })
    }
}

impl InternalService for Echo {
    fn run(self: Box<Self>, api: InternalApi) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            if let Err(e) = api.subscribe(&self.pattern) {
                tracing::error!("echo: cannot subscribe '{}': {}", self.pattern, e.why);
                return;
            }
            while let Some(req) = api.next_request().await {
                api.return_(&req, Status::Ok, &req.request_info, &req.request);
            }
        })
    }
}
