//! What a service shows operators: a JSON view for the admin API and the
//! dashboard, Prometheus samples, and operations (purge, replay, ...) the
//! admin API can ask of it.

use crate::ServiceError;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// One Prometheus sample: `cumulo_<name>{<label>="<value>"} <value>`.
#[derive(Debug, Clone)]
pub struct Metric {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricKind,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

pub trait Report {
    /// The kind of service (`queue`): the admin API lists reports by kind
    /// (`GET /v1/queues`).
    fn kind(&self) -> &'static str;
    /// Which one of its kind (a queue's prefix).
    fn id(&self) -> String;
    /// The state as JSON, one object.
    fn view(&self) -> serde_json::Value;
    /// Samples for `/metrics`.
    fn metrics(&self, out: &mut Vec<Metric>);
    /// An operation asked through the admin API (`purge`, `replay`, ...).
    fn operate(&self, op: &str, args: &serde_json::Value) -> Result<serde_json::Value, ServiceError>;
}

/// The reports of the running service instances, kept by the core: an
/// instance adds its own and the core removes it when the instance stops.
#[derive(Default, Clone)]
pub struct Reports(Rc<RefCell<Vec<Owned>>>);

/// A report and the instance that owns it.
type Owned = (u64, Rc<dyn Report>);

impl Reports {
    /// Adds (or replaces) the report of `owner`.
    pub fn set(&self, owner: u64, report: Rc<dyn Report>) {
        let mut all = self.0.borrow_mut();
        all.retain(|(o, r)| *o != owner || r.kind() != report.kind());
        all.push((owner, report));
    }

    pub fn remove_owner(&self, owner: u64) {
        self.0.borrow_mut().retain(|(o, _)| *o != owner);
    }

    /// The reports of one kind, in the order they were added.
    pub fn of_kind(&self, kind: &str) -> Vec<Rc<dyn Report>> {
        self.0.borrow().iter().filter(|(_, r)| r.kind() == kind).map(|(_, r)| r.clone()).collect()
    }

    pub fn all(&self) -> Vec<Rc<dyn Report>> {
        self.0.borrow().iter().map(|(_, r)| r.clone()).collect()
    }
}
