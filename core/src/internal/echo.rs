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
        let pattern = match settings.get("pattern") {
            None => "*".to_string(),
            Some(toml::Value::String(s)) => s.clone(),
            Some(_) => return Err("echo: settings.pattern must be a string".into()),
        };
        if let Some(k) = settings.keys().find(|k| *k != "pattern") {
            return Err(format!("echo: unknown setting '{k}' (known: pattern)"));
        }
        Ok(Echo { pattern })
    }
}

impl InternalService for Echo {
    fn run(self: Box<Self>, api: InternalApi) -> Pin<Box<dyn Future<Output = ()>>> {
        Box::pin(async move {
            if let Err((_, why)) = api.subscribe(&self.pattern) {
                tracing::error!("echo: cannot subscribe '{}': {why}", self.pattern);
                return;
            }
            while let Some(req) = api.next_request().await {
                api.return_(&req, Status::Ok, &req.request_info, &req.request);
            }
        })
    }
}
