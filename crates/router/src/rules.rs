//! CloudI's routing rules for what a CloudI-protocol instance sends
//! (docs/CLOUDI.md, "Routing as in CloudI"); native senders keep cumulo's.
//!
//! - The sender is never its own destination: CloudI picks among the
//!   pattern's group with the sending process excluded (cpg's
//!   `get_closest_pid`/`get_members` with the sender excluded). A CloudI
//!   thread handles one request at a time, so a request handed to itself
//!   would wait until its timeout.
//! - mcast_async sends one copy per subscription of the best-matching
//!   pattern only (CloudI's `get_members` of that pattern's group), to every
//!   subscriber but the sender.

use crate::instance::Instance;
use crate::registry::{InstanceId, PatternEntry, Registry};
use std::rc::Rc;

/// The instance a request from `sender` must not go to: the sender itself
/// if it speaks CloudI's protocol.
pub fn excluded(instances: &ahash::AHashMap<InstanceId, Instance>, sender: InstanceId) -> Option<InstanceId> {
    instances.get(&sender).filter(|i| i.cloudi).map(|_| sender)
}

/// Whether the pattern has a subscriber other than `exclude`.
pub fn serves_other(entry: &PatternEntry, exclude: Option<InstanceId>) -> bool {
    match exclude {
        Some(x) => entry.instances.iter().any(|&i| i != x),
        None => true,
    }
}

/// The destinations of a CloudI sender's mcast_async: one per subscription
/// of the most specific pattern matching `name`, the sender left out.
pub fn mcast_destinations(registry: &mut Registry, name: &str, sender: InstanceId) -> Vec<(InstanceId, Rc<str>)> {
    let Some(entry) = registry.lookup(name) else { return Vec::new() };
    let pattern = entry.pattern.clone();
    entry.instances.iter().filter(|&&i| i != sender).map(|&i| (i, pattern.clone())).collect()
}
