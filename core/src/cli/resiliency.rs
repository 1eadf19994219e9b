//! `cumulo resiliency`: the resiliency policies of a running core, its
//! circuit breakers and ejected instances; reset breakers by hand, replace
//! the policies with a file's.

use super::{call, client, pretty, table, AdminArgs, Outcome};
use clap::Subcommand;
use hyper::Method;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug, Clone)]
pub enum ResiliencyCommand {
    /// The policies, the retry and breaker counters, every circuit breaker
    /// and every instance ejected as an outlier (the default).
    #[command(after_help = super::help::RESILIENCY_SHOW)]
    Show,
    /// Close circuit breakers by hand, on every shard: every one, or those
    /// of a policy and/or a pattern.
    #[command(after_help = super::help::RESILIENCY_RESET)]
    Reset {
        /// Only this policy's breakers.
        #[arg(long)]
        policy: Option<String>,
        /// Only the breakers of this pattern (as `cumulo resiliency` lists it).
        #[arg(long)]
        pattern: Option<String>,
    },
    /// Replace the policies with a file's: [[policy]] tables (TOML, a core
    /// config file will do) or a JSON list. Breakers start over; the config
    /// file is not changed.
    #[command(after_help = super::help::RESILIENCY_SET)]
    Set {
        /// A TOML file with [[policy]] tables, or a .json file with a list.
        file: PathBuf,
    },
}

pub fn resiliency(a: &AdminArgs, cmd: Option<ResiliencyCommand>) -> Outcome {
    let c = client(a)?;
    let v = match cmd.unwrap_or(ResiliencyCommand::Show) {
        ResiliencyCommand::Show => {
            let v = call(&c, Method::GET, "/v1/resiliency", None)?;
            return Ok(if a.json() { pretty(&v) } else { describe(&v) });
        }
        ResiliencyCommand::Reset { policy, pattern } => {
            let path = format!("/v1/resiliency/breakers/reset{}", query(&[("policy", policy), ("pattern", pattern)]));
            let v = call(&c, Method::POST, &path, None)?;
            if !a.json() {
                return Ok(format!("{} breakers were open or half-open; now closed\n", v["reset"]));
            }
            v
        }
        ResiliencyCommand::Set { file } => {
            let v = call(&c, Method::PUT, "/v1/resiliency/policies", Some(&policies_from_file(&file)?))?;
            if !a.json() {
                let count = v["policies"].as_array().map_or(0, Vec::len);
                return Ok(format!("{count} policies in force on every shard (breakers start over)\n"));
            }
            v
        }
    };
    Ok(pretty(&v))
}

/// `?k=v&...` of the values given, percent-encoded.
fn query(pairs: &[(&str, Option<String>)]) -> String {
    let given: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| {
            let v = v.as_ref()?;
            Some(format!("{k}={}", percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)))
        })
        .collect();
    if given.is_empty() {
        String::new()
    } else {
        format!("?{}", given.join("&"))
    }
}

/// The policies of a file as the admin API takes them: a JSON file as it
/// is, a TOML file's [[policy]] tables as a JSON list.
fn policies_from_file(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "json") {
        return serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()));
    }
    // A JSON list under another name will do too ("[[policy]]" is no JSON).
    if let Ok(list @ Value::Array(_)) = serde_json::from_str(&text) {
        return Ok(list);
    }
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.to_string().trim()))?;
    match table.get("policy") {
        Some(p @ toml::Value::Array(_)) => serde_json::to_value(p).map_err(|e| e.to_string()),
        Some(_) => Err(format!("{}: 'policy' must be written [[policy]]", path.display())),
        None => Err(format!(
            "{}: no [[policy]] table in it (to remove every policy, give a .json file holding [])",
            path.display()
        )),
    }
}

/// The answer of `GET /v1/resiliency` in words and tables.
fn describe(v: &Value) -> String {
    let empty = vec![];
    let policies = v["policies"].as_array().unwrap_or(&empty);
    if policies.is_empty() {
        return "no resiliency policies ([[policy]] in the config file, or cumulo resiliency set FILE)\n".into();
    }
    let mut out = table::render(
        &["POLICY", "DESTINATIONS", "TIMEOUT_MS", "RETRIES", "BREAKER", "OUTLIER"],
        &policies.iter().map(policy_row).collect::<Vec<_>>(),
    );
    let s = &v["stats"];
    out.push_str(&format!(
        "\nretries {} (recovered {}, gave up {}), refused by breakers {}, trips {}, ejections {}, waiting for a retry {}\n",
        s["retries"], s["recovered"], s["gave_up"], s["refused"], s["trips"], s["ejections"], v["waiting"]
    ));
    let cell = table::cell;
    let breakers = v["breakers"].as_array().unwrap_or(&empty);
    if !breakers.is_empty() {
        let rows: Vec<Vec<String>> = breakers
            .iter()
            .map(|b| {
                let keys = ["policy", "pattern", "state", "failures", "trips", "refused", "retries", "shard"];
                keys.iter().map(|k| cell(&b[*k])).collect()
            })
            .collect();
        out.push('\n');
        out.push_str(&table::render(
            &["POLICY", "PATTERN", "STATE", "FAILURES", "TRIPS", "REFUSED", "RETRIES", "SHARD"],
            &rows,
        ));
    }
    let ejected = v["ejected"].as_array().unwrap_or(&empty);
    if !ejected.is_empty() {
        let rows: Vec<Vec<String>> = ejected
            .iter()
            .map(|e| {
                let back = format!("{:.1} s", e["back_in_ms"].as_u64().unwrap_or(0) as f64 / 1000.0);
                vec![cell(&e["instance"]), cell(&e["label"]), back, cell(&e["ejections"]), cell(&e["shard"])]
            })
            .collect();
        out.push_str("\nejected instances:\n");
        out.push_str(&table::render(&["INSTANCE", "LABEL", "BACK_IN", "EJECTIONS", "SHARD"], &rows));
    }
    out
}

/// One policy in a line: what each of its parts is set to ("-" if absent).
fn policy_row(p: &Value) -> Vec<String> {
    let destinations: Vec<&str> =
        p["destinations"].as_array().map_or(vec![], |d| d.iter().filter_map(Value::as_str).collect());
    let timeout = match p["timeout_ms"].as_u64() {
        Some(0) | None => "-".to_string(),
        Some(t) => t.to_string(),
    };
    let retries = p["retry"]["max_retries"].as_u64().map_or("-".into(), |n| n.to_string());
    let b = &p["circuit_breaker"];
    let breaker = if b.is_null() {
        "-".to_string()
    } else if b["consecutive_failures"].as_u64().unwrap_or(0) > 0 {
        format!("{} in a row", b["consecutive_failures"])
    } else {
        format!("{} of {}", b["failure_ratio"], b["window"])
    };
    let outlier = p["outlier"]["consecutive_failures"].as_u64().map_or("-".into(), |n| format!("{n} in a row"));
    vec![table::cell(&p["name"]), destinations.join(" "), timeout, retries, breaker, outlier]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_files_policies_become_a_json_list() {
        let dir = std::env::temp_dir().join(format!("cumulo-resiliency-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.toml");
        std::fs::write(&f, "[[policy]]\nname = \"b\"\ndestinations = [\"/b/*\"]\ntimeout_ms = 500\n").unwrap();
        let v = policies_from_file(&f).unwrap();
        assert_eq!(v[0]["name"], "b");
        assert_eq!(v[0]["timeout_ms"], 500);
        std::fs::write(&f, "[core]\n").unwrap();
        assert!(policies_from_file(&f).unwrap_err().contains("no [[policy]]"));
        let j = dir.join("p.json");
        std::fs::write(&j, "[]").unwrap();
        assert_eq!(policies_from_file(&j).unwrap(), serde_json::json!([]));
        std::fs::write(&f, "[{\"name\": \"b\"}]").unwrap();
        assert_eq!(policies_from_file(&f).unwrap()[0]["name"], "b");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn only_the_options_given_are_in_the_query() {
        assert_eq!(query(&[("policy", None), ("pattern", None)]), "");
        assert_eq!(
            query(&[("policy", Some("b".into())), ("pattern", Some("/b/*".into()))]),
            "?policy=b&pattern=%2Fb%2F%2A"
        );
    }
}
