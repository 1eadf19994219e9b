//! Reload: the edited config file applied to the running core, at SIGHUP,
//! `POST /v1/reload` and `cumulo reload` (docs/OPERATIONS.md, Reload).
//!
//! The file is read and checked whole first; an invalid file, or one that
//! changes what only a restart can change (`[core]`, `[admin]`,
//! `[cluster]`, `[tracing]`, `[[client]]`, `[acl]`), is refused and
//! nothing changes.
//! Otherwise the services of the file are made to run as the file says:
//!
//! - a service is the same one when its prefix, `internal`, `path` and
//!   `args` are (the first such running service, in file order);
//! - a service that differs only in live options (`PATCH`'s) is updated in
//!   place; one that differs in anything else is replaced: an external one
//!   is started anew before the old one is removed (its names stay
//!   served), an internal one is removed first (it may hold a port);
//! - services the file no longer lists are removed, new ones added;
//! - services added through the admin API (not from the file) are left as
//!   they are, and reported as kept;
//! - when the file's `[[policy]]` tables changed, they replace the policies
//!   in force on every shard (those set through the admin API included;
//!   breakers start over); unchanged, the policies in force stay as they
//!   are.

use cumulo_config::policy::PolicyConfig;
use cumulo_config::{Config, ServiceConfig};
use cumulo_node::supervisor::{ServiceChanges, Supervisor};
use cumulo_router::ServiceId;
use serde::Serialize;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;

/// Why a reload changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadError {
    /// The core was not started from a file.
    NoFile,
    /// The file does not load: file, field and reason.
    Invalid(String),
    /// The file changes what needs a restart.
    NeedsRestart(String),
    /// Another reload is being applied.
    Busy,
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::NoFile => write!(f, "this core was not started from a config file: nothing to reload"),
            ReloadError::Invalid(why) => write!(f, "{why}; nothing changed"),
            ReloadError::NeedsRestart(why) => write!(f, "{why}: that needs a restart; nothing changed"),
            ReloadError::Busy => write!(f, "another reload is being applied; try again when it is done"),
        }
    }
}

/// One service in a plan, as the reply and the log name it.
#[derive(Debug, Clone, Serialize)]
pub struct Named {
    /// The running service's id (none for one still to add).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<ServiceId>,
    pub prefix: String,
    /// `internal = "..."`, or the program.
    pub what: String,
    /// For an update or a replacement: what differs.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub changes: String,
}

/// What a reload does (or did).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    pub file: String,
    pub added: Vec<Named>,
    pub removed: Vec<Named>,
    /// Live options changed in place.
    pub updated: Vec<Named>,
    /// Started anew with the file's settings.
    pub replaced: Vec<Named>,
    pub unchanged: usize,
    /// Added through the admin API, not in the file: left as they are.
    pub kept: Vec<Named>,
    /// The file's policies, when they changed: put in force on every shard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policies: Option<Policies>,
    #[serde(skip)]
    steps: Steps,
}

/// The policies a reload puts in force, as the reply names them.
#[derive(Debug, Clone, Serialize)]
pub struct Policies {
    pub count: usize,
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct Steps {
    policies: Option<Vec<PolicyConfig>>,
    add: Vec<ServiceConfig>,
    remove: Vec<ServiceId>,
    update: Vec<(ServiceId, ServiceChanges)>,
    /// (old id, the new config, internal).
    replace: Vec<(ServiceId, ServiceConfig, bool)>,
}

impl Plan {
    pub fn changes_nothing(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.updated.is_empty()
            && self.replaced.is_empty()
            && self.policies.is_none()
    }

    /// One line for the log.
    pub fn summary(&self) -> String {
        let list = |v: &[Named]| v.iter().map(|n| n.prefix.as_str()).collect::<Vec<_>>().join(" ");
        let mut parts = Vec::new();
        for (word, v) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("updated", &self.updated),
            ("replaced", &self.replaced),
        ] {
            if !v.is_empty() {
                parts.push(format!("{word} {} ({})", v.len(), list(v)));
            }
        }
        if let Some(p) = &self.policies {
            parts.push(format!("policies replaced ({}: {})", p.count, p.names.join(" ")));
        }
        parts.push(format!("unchanged {}", self.unchanged));
        if !self.kept.is_empty() {
            parts.push(format!("kept {} added through the admin API ({})", self.kept.len(), list(&self.kept)));
        }
        parts.join(", ")
    }
}

/// The config file a core runs from, and the services it manages.
pub struct Reloader {
    file: Option<PathBuf>,
    supervisor: Rc<Supervisor>,
    /// What the core runs with: the sections a reload may not change are
    /// compared with it.
    applied: RefCell<Config>,
    /// The services that came from the file (by id), in file order.
    managed: RefCell<Vec<ServiceId>>,
    busy: Cell<bool>,
}

/// The identity of a service across reloads.
fn identity(c: &ServiceConfig) -> (String, Option<String>, Option<String>, Vec<String>) {
    (c.prefix.clone(), c.internal.clone(), c.path.clone(), c.args.clone())
}

fn what(c: &ServiceConfig) -> String {
    match (&c.internal, &c.path) {
        (Some(i), _) => format!("internal {i}"),
        (None, Some(p)) => p.clone(),
        (None, None) => String::new(),
    }
}

fn named(id: Option<ServiceId>, c: &ServiceConfig, changes: String) -> Named {
    Named { id, prefix: c.prefix.clone(), what: what(c), changes }
}

/// The keys whose values differ between two JSON objects.
fn differing(a: &Value, b: &Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return if a == b { vec![] } else { vec![String::new()] };
    };
    let mut keys: Vec<String> = a.keys().chain(b.keys()).filter(|k| a.get(*k) != b.get(*k)).cloned().collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The sections a reload may not change, compared; the first difference
/// named.
fn restart_only_change(old: &Config, new: &Config) -> Option<String> {
    let sections: [(&str, Value, Value); 5] = [
        ("core", json(&old.core), json(&new.core)),
        ("cluster", json(&old.cluster), json(&new.cluster)),
        // The exporter and every shard's recorder are made at start.
        ("tracing", json(&old.tracing), json(&new.tracing)),
        ("client", json(&old.clients), json(&new.clients)),
        ("acl", json(&old.acl), json(&new.acl)),
    ];
    for (name, a, b) in sections {
        if a != b {
            let keys = differing(&a, &b);
            let keys: Vec<String> =
                keys.iter().map(|k| if k.is_empty() { name.into() } else { format!("{name}.{k}") }).collect();
            return Some(format!("{} changed", keys.join(", ")));
        }
    }
    // The admin tokens are not serialized (secrets): their Debug form,
    // compared here and never shown, tells a change apart.
    if format!("{:?}", old.admin) != format!("{:?}", new.admin) {
        return Some("[admin] changed".into());
    }
    None
}

fn json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or_default()
}

impl Reloader {
    /// `file`: where `cfg` was read from (none: reload refuses). `started`:
    /// the ids `Supervisor::start_all` gave the file's services.
    pub fn new(file: Option<PathBuf>, supervisor: Rc<Supervisor>, cfg: Config, started: Vec<ServiceId>) -> Reloader {
        Reloader {
            file,
            supervisor,
            applied: RefCell::new(cfg),
            managed: RefCell::new(started),
            busy: Cell::new(false),
        }
    }

    fn load(&self) -> Result<Config, ReloadError> {
        let file = self.file.as_ref().ok_or(ReloadError::NoFile)?;
        Config::load(file, cumulo_node::catalogue::checks()).map_err(|e| ReloadError::Invalid(e.to_string()))
    }

    /// What reloading the file would do now; changes nothing.
    pub fn plan(&self) -> Result<Plan, ReloadError> {
        let new = self.load()?;
        self.plan_for(&new)
    }

    fn plan_for(&self, new: &Config) -> Result<Plan, ReloadError> {
        if let Some(why) = restart_only_change(&self.applied.borrow(), new) {
            return Err(ReloadError::NeedsRestart(why));
        }
        let mut plan =
            Plan { file: self.file.as_ref().map(|f| f.display().to_string()).unwrap_or_default(), ..Plan::default() };
        let running = self.supervisor.services();
        let managed = self.managed.borrow();
        // The running services of the file that still exist, in file order.
        let mut candidates: Vec<(ServiceId, ServiceConfig)> = managed
            .iter()
            .filter_map(|id| {
                running.iter().find(|s| s.id == *id && !s.is_removing()).map(|s| (*id, s.config().clone()))
            })
            .collect();
        for want in &new.services {
            let Some(at) = candidates.iter().position(|(_, c)| identity(c) == identity(want)) else {
                plan.added.push(named(None, want, String::new()));
                plan.steps.add.push(want.clone());
                continue;
            };
            let (id, have) = candidates.remove(at);
            let (a, b) = (json(&have), json(want));
            let keys = differing(&a, &b);
            if keys.is_empty() {
                plan.unchanged += 1;
            } else if keys.iter().all(|k| ServiceChanges::FIELDS.contains(&k.as_str())) {
                let changes: ServiceChanges =
                    serde_json::from_value(Value::Object(keys.iter().map(|k| (k.clone(), b[k].clone())).collect()))
                        .map_err(|e| ReloadError::Invalid(format!("service {}: {e}", want.prefix)))?;
                let said = keys.iter().map(|k| format!("{k} {} -> {}", a[k], b[k])).collect::<Vec<_>>().join(", ");
                plan.updated.push(named(Some(id), want, said));
                plan.steps.update.push((id, changes));
            } else {
                plan.replaced.push(named(Some(id), want, keys.join(", ")));
                plan.steps.replace.push((id, want.clone(), want.internal.is_some()));
            }
        }
        for (id, gone) in candidates {
            plan.removed.push(named(Some(id), &gone, String::new()));
            plan.steps.remove.push(id);
        }
        for s in running.iter().filter(|s| !managed.contains(&s.id) && !s.is_removing()) {
            plan.kept.push(named(Some(s.id), &s.config(), String::new()));
        }
        if self.applied.borrow().policies != new.policies {
            let names = new.policies.iter().map(|p| p.name.clone()).collect();
            plan.policies = Some(Policies { count: new.policies.len(), names });
            plan.steps.policies = Some(new.policies.clone());
        }
        Ok(plan)
    }

    /// Reads the file and applies it; returns what was done once it is
    /// (removed services' processes stopped).
    pub async fn reload(&self) -> Result<Plan, ReloadError> {
        if self.busy.replace(true) {
            return Err(ReloadError::Busy);
        }
        let result = self.apply().await;
        self.busy.set(false);
        match &result {
            Ok(plan) if plan.changes_nothing() => tracing::info!("reload of {}: nothing to change", plan.file),
            Ok(plan) => tracing::info!("reload of {}: {}", plan.file, plan.summary()),
            Err(why) => tracing::warn!("reload refused: {why}"),
        }
        result
    }

    async fn apply(&self) -> Result<Plan, ReloadError> {
        let new = self.load()?;
        let plan = self.plan_for(&new)?;
        // A new internal service is tried once first, as at start: one that
        // cannot start (its port taken) refuses the reload, nothing changed.
        for (i, svc) in plan.steps.add.iter().enumerate() {
            if let Some(name) = &svc.internal {
                cumulo_node::catalogue::create(name, &svc.settings)
                    .map_err(|why| ReloadError::Invalid(format!("service {} ({i} to add): {why}", svc.prefix)))?;
            }
        }
        let steps = plan.steps.clone();
        let sup = &self.supervisor;
        let mut managed: Vec<ServiceId> = self.managed.borrow().clone();
        for id in &steps.remove {
            if let Err(e) = sup.remove(*id).await {
                tracing::warn!("reload: removing service {id}: {e:?}");
            }
            managed.retain(|m| m != id);
        }
        for (id, changes) in &steps.update {
            if let Err(e) = sup.update(*id, changes) {
                tracing::warn!("reload: updating service {id}: {e:?}");
            }
        }
        for (old, cfg, internal) in &steps.replace {
            if *internal {
                let _ = sup.remove(*old).await;
                managed.push(sup.add(cfg.clone()));
            } else {
                // The new processes first, serving, before the old ones go:
                // the names stay served.
                let new = sup.add(cfg.clone());
                managed.push(new);
                let limit = std::time::Duration::from_millis(cfg.timeout_init as u64);
                if !sup.wait_serving(new, limit).await {
                    tracing::warn!(
                        "reload: the new {} is not serving within its timeout_init ({} ms); the old one is removed anyway",
                        cfg.prefix,
                        cfg.timeout_init
                    );
                }
                let _ = sup.remove(*old).await;
            }
            managed.retain(|m| m != old);
        }
        for cfg in &steps.add {
            managed.push(sup.add(cfg.clone()));
        }
        if let Some(policies) = steps.policies {
            let missing = sup.set_policies(policies).await;
            if !missing.is_empty() {
                tracing::warn!("reload: shards {missing:?} did not confirm the new policies in time");
            }
        }
        *self.managed.borrow_mut() = managed;
        *self.applied.borrow_mut() = new;
        Ok(plan)
    }
}
