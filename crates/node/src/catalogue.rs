//! The internal services this node can run, handed in by the binary that
//! builds them (the services are crates the node does not depend on): how
//! to create one from its settings, and the checks the config applies to
//! services added at run time.

use crate::api::InternalService;
use std::sync::OnceLock;

/// Creates one instance of the internal service `name` from its settings.
pub type Create = fn(&str, &toml::Table) -> Result<Box<dyn InternalService>, String>;

static CREATE: OnceLock<Create> = OnceLock::new();
static CHECKS: OnceLock<cumulo_config::Catalogue> = OnceLock::new();

/// Set once, before the node starts; later calls are ignored.
pub fn set(create: Create, checks: cumulo_config::Catalogue) {
    let _ = CREATE.set(create);
    let _ = CHECKS.set(checks);
}

pub fn create(name: &str, settings: &toml::Table) -> Result<Box<dyn InternalService>, String> {
    match CREATE.get() {
        Some(create) => create(name, settings),
        None => Err(format!("internal service '{name}': this node was given no catalogue of internal services")),
    }
}

/// The checks of the internal services' settings, as the config applies them.
pub fn checks() -> &'static cumulo_config::Catalogue {
    CHECKS.get_or_init(|| cumulo_config::Catalogue {
        known: &[],
        check: |name, _| Err(format!("unknown internal service '{name}': this node was given no catalogue")),
        needs_cluster: |_, _| None,
        file_settings: |_| &[],
    })
}
