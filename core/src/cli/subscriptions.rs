//! `cumulo subscriptions`: the patterns a running core routes, with the
//! instances and services serving each; and, per service, the patterns it
//! subscribes (`services show`, the PATTERNS column of `services list`).

use super::{call, client, pretty, table, AdminArgs, AdminClient, Outcome};
use clap::Args;
use hyper::Method;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Args, Debug)]
pub struct SubscriptionsArgs {
    /// Only the patterns that start with this, e.g. /tests/.
    #[arg(long, value_name = "P")]
    pub prefix: Option<String>,
    /// Only the patterns this service's instances subscribe.
    #[arg(long, value_name = "ID")]
    pub service: Option<u64>,
}

/// The `GET /v1/subscriptions` entries.
pub(super) fn fetch(c: &AdminClient) -> Result<Vec<Value>, String> {
    let mut v = call(c, Method::GET, "/v1/subscriptions", None)?;
    Ok(match v["subscriptions"].take() {
        Value::Array(list) => list,
        _ => Vec::new(),
    })
}

/// How many of an entry's instances belong to `service`.
fn instances_of(entry: &Value, service: u64) -> usize {
    entry["instances"].as_array().map_or(0, |l| l.iter().filter(|i| i["service_id"].as_u64() == Some(service)).count())
}

/// Each service's patterns, with how many of its instances subscribe each.
pub(super) fn by_service(subs: &[Value]) -> BTreeMap<u64, Vec<(String, usize)>> {
    let mut out: BTreeMap<u64, Vec<(String, usize)>> = BTreeMap::new();
    for e in subs {
        let pattern = e["pattern"].as_str().unwrap_or_default();
        let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
        for i in e["instances"].as_array().into_iter().flatten() {
            if let Some(id) = i["service_id"].as_u64() {
                *counts.entry(id).or_default() += 1;
            }
        }
        for (id, n) in counts {
            out.entry(id).or_default().push((pattern.to_string(), n));
        }
    }
    out
}

pub fn subscriptions(a: &AdminArgs, args: SubscriptionsArgs) -> Outcome {
    let c = client(a)?;
    let subs: Vec<Value> = fetch(&c)?
        .into_iter()
        .filter(|e| args.prefix.as_deref().is_none_or(|p| e["pattern"].as_str().unwrap_or("").starts_with(p)))
        .filter(|e| args.service.is_none_or(|id| instances_of(e, id) > 0))
        .collect();
    if a.json() {
        return Ok(pretty(&serde_json::json!({ "subscriptions": subs })));
    }
    if subs.is_empty() {
        return Ok(match (&args.prefix, args.service) {
            (Some(p), _) => format!("no subscriptions under {p}\n"),
            (None, Some(id)) => format!("service {id} subscribes nothing\n"),
            (None, None) => "no subscriptions\n".into(),
        });
    }
    // Service ids alone say little: their prefixes come from the service list.
    let services = call(&c, Method::GET, "/v1/services", None)?;
    let prefix_of = |id: u64| {
        services["services"]
            .as_array()
            .and_then(|l| l.iter().find(|s| s["id"].as_u64() == Some(id)))
            .and_then(|s| s["prefix"].as_str())
            .unwrap_or("removed")
            .to_string()
    };
    let rows: Vec<Vec<String>> = subs
        .iter()
        .map(|e| {
            let instances = e["instances"].as_array().map_or(&[][..], Vec::as_slice);
            let mut ids: Vec<u64> = instances.iter().filter_map(|i| i["service_id"].as_u64()).collect();
            ids.sort_unstable();
            ids.dedup();
            let mut who: Vec<String> = ids.iter().map(|id| format!("{id} ({})", prefix_of(*id))).collect();
            let unmanaged = instances.iter().filter(|i| i["service_id"].is_null()).count();
            if unmanaged > 0 {
                who.push(format!("{unmanaged} not of a service (unmanaged or the gateway's)"));
            }
            vec![table::cell(&e["pattern"]), instances.len().to_string(), who.join(", ")]
        })
        .collect();
    Ok(table::render(&["PATTERN", "INSTANCES", "SERVICES"], &rows))
}
