//! The resiliency policies on every shard: shard 0 (the admin API, a
//! reload) sets new ones, or closes breakers by hand, on its own core and
//! on every other shard's, and waits until each has done it, so that the
//! next request finds them whatever shard it enters.

use super::report::REPORT_TIMEOUT;
use super::{Links, Message};
use cumulo_config::policy::PolicyConfig;
use cumulo_router::Shared;
use std::sync::Arc;

/// Replaces the policies on every shard (their breakers start over).
/// Returns the shards that did not confirm in time (far behind, they apply
/// the new policies when they get to them).
pub async fn set_everywhere(core: &Shared, shards: Option<&Links>, policies: Vec<PolicyConfig>) -> Vec<u32> {
    core.borrow_mut().set_policies(&policies);
    let Some(links) = shards else { return Vec::new() };
    let policies = Arc::new(policies);
    let make = |applied| Message::Policies { policies: policies.clone(), applied };
    links.ask_others(make, REPORT_TIMEOUT).await.1
}

/// Closes the breakers of `policy` on `pattern` (None: every one) on every
/// shard: how many were open or half-open, and the shards that did not
/// answer in time.
pub async fn reset_everywhere(
    core: &Shared,
    shards: Option<&Links>,
    policy: Option<&str>,
    pattern: Option<&str>,
) -> (usize, Vec<u32>) {
    let mine = core.borrow_mut().reset_breakers(policy, pattern);
    let Some(links) = shards else { return (mine, Vec::new()) };
    let make = |reset| Message::ResetBreakers {
        policy: policy.map(str::to_string),
        pattern: pattern.map(str::to_string),
        reset,
    };
    let (counts, missing) = links.ask_others(make, REPORT_TIMEOUT).await;
    (mine + counts.iter().sum::<usize>(), missing)
}
