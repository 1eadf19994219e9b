//! Every limit the docs give a number for in a table says the same number
//! wherever it is given, and the number the code has: docs/CONFIG.md,
//! GUARANTEES.md, CLUSTER.md, GATEWAY.md and ADMIN.md cannot drift apart,
//! nor from `core/src/config.rs` and the constants they name.
//!
//! What counts as a limit given in a table (only tables with a `default` or
//! a `limit` column; in every cell but `meaning` and `shown by`):
//! - a row of a key table (a `key` or `setting` column): the key, and the
//!   number in backquotes its `default` starts with (`` `8388608` (8 MiB) ``,
//!   `` `300` s ``); the key's section comes from the heading above the
//!   table (`[core]`, `[[service]]`, the `filesystem`, `cron`, `http_client`, `health_check`, `tcp`, `udp` or `queue` service,
//!   GATEWAY.md's gateway settings, or its WebSocket table);
//! - a row of a limits table: the names in backquotes of its `where` (else
//!   its `limit` or `what`) column, paired in order with the values its
//!   value column starts with (`1024 requests, 64 MiB` for `` `queue_limit`,
//!   `queue_size` ``; parts split at `, `, `; ` and ` / `);
//! - in such a table, a name written next to a number: `` 256 (`MAX_NODES`) ``,
//!   `` 1,048,576 requests, `config::X` ``, `` `queue_limit` (1024) ``,
//!   `` `cache_size` 64 MiB ``.
//!
//! A name is a limit's when it is `section.key` (`core.max_frame`), a key
//! of the section its table or row is about (the first cell of a limits row
//! says it: `HTTP`, `WebSocket`, `filesystem`, `cron`, `http_client`, `health_check`, `tcp bridge`, `udp bridge`, `queue service`, `NATS`,
//! `shard`, `node`, else the config section that has the key), or a
//! constant (`MAX_NODES`, `config::NODE_QUEUE_LIMIT`). Other words in
//! backquotes (frame names, statuses, test names) are not limits.
//!
//! Numbers are normalised: `1,048,576` is 1048576; `64 MiB`, `67108864`
//! and `67108864 bytes` are one value; `10 s` is `10000 ms`. A value with
//! a unit and one without agree when their numbers do; two units that
//! differ (bytes, ms) never do.
//!
//! Against the code: the default of a key table's row is its key's default
//! in `Config` (read through its serialisation, so no list of keys is kept
//! here); a constant, and the options of another node's or shard's
//! pseudo-instance (`node.queue_limit`, ...), come from [`constants`]. A
//! constant written with its path (`config::X`) must be one of those.

use cumulo_config::{AdminConfig, CoreConfig, ServiceConfig, ServiceOptions};
use std::collections::BTreeMap;
use std::path::Path;

const DOCS: &[&str] = &["CONFIG.md", "GUARANTEES.md", "CLUSTER.md", "GATEWAY.md", "ADMIN.md"];

/// The limits that are constants of the code (and the options of the
/// pseudo-instances, which are made of them), by every name the docs may
/// give them; the first name is the one reported.
fn constants() -> Vec<(&'static [&'static str], u64)> {
    use cumulo_cluster as members;
    use cumulo_config as config;
    let (node, shard) = (ServiceOptions::node(), ServiceOptions::shard());
    vec![
        (&["node.queue_limit", "NODE_QUEUE_LIMIT"], node.queue_limit as u64),
        (&["node.queue_size"], node.queue_size as u64),
        (&["node.max_window"], node.max_window as u64),
        (&["shard.queue_limit", "SHARD_QUEUE_LIMIT"], shard.queue_limit as u64),
        (&["shard.queue_size"], shard.queue_size as u64),
        (&["shard.max_window"], shard.max_window as u64),
        (&["MAX_NODES"], members::MAX_NODES as u64),
        (&["MAX_REMOTE_PATTERNS"], members::MAX_REMOTE_PATTERNS as u64),
        (&["MAX_REMOTE_SUBSCRIPTIONS"], members::MAX_REMOTE_SUBSCRIPTIONS as u64),
        (&["MAX_REMOTE_PATTERN_LEN"], members::MAX_REMOTE_PATTERN_LEN as u64),
        (&["MAX_WINDOW"], config::MAX_WINDOW as u64),
        (&["MAX_THREADS"], config::MAX_THREADS as u64),
        (&["MAX_JOBS"], cumulo_cron::MAX_JOBS as u64),
        (&["MAX_REQUEST_BYTES"], cumulo_cron::MAX_REQUEST_BYTES as u64),
    ]
}

/// The sections of the config file, whose defaults the code gives.
const CONFIG_SECTIONS: &[&str] = &["core", "admin", "cluster", "service"];

/// The defaults of every numeric key of the config file: `core.max_frame`.
fn config_defaults() -> BTreeMap<String, u64> {
    let sections = [
        ("core", serde_json::to_value(CoreConfig::default()).unwrap()),
        ("admin", serde_json::to_value(AdminConfig::default()).unwrap()),
        ("cluster", serde_json::to_value(cumulo_config::cluster::ClusterConfig::default()).unwrap()),
        ("service", serde_json::to_value(ServiceConfig::default()).unwrap()),
    ];
    let mut out = BTreeMap::new();
    for (section, v) in sections {
        for (key, value) in v.as_object().unwrap() {
            if let Some(n) = value.as_u64() {
                out.insert(format!("{section}.{key}"), n);
            }
        }
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Bytes,
    Ms,
}

/// A number as the docs write it, normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    /// In bytes, ms, or a count.
    n: u64,
    unit: Option<Unit>,
}

impl Value {
    fn agrees(&self, other: &Value) -> bool {
        self.n == other.n && (self.unit.is_none() || other.unit.is_none() || self.unit == other.unit)
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.unit {
            Some(Unit::Bytes) => write!(f, "{} bytes", self.n),
            Some(Unit::Ms) => write!(f, "{} ms", self.n),
            None => write!(f, "{}", self.n),
        }
    }
}

/// One limit given a number in a document.
#[derive(Debug, Clone)]
struct Mention {
    /// `docs/CLUSTER.md:152`.
    at: String,
    /// `core.max_frame`, `websocket.max_frame`, `node.queue_limit`, `MAX_NODES`.
    limit: String,
    value: Value,
    /// For a key table's row: the number in backquotes, as the file holds it.
    literal: Option<u64>,
}

/// A number at the start of `s` (`1024`, `1,048,576`, not `0.2` nor `1 ..`
/// nor `2 ×`): the number, its unit, and the rest of `s` after them.
fn quantity(s: &str) -> Option<(Value, &str)> {
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let first = digits(s);
    if first == 0 {
        return None;
    }
    let (mut n, mut end) = (s[..first].parse::<u64>().ok()?, first);
    // Thousands: exactly three digits after each comma.
    while s[end..].starts_with(',') && digits(&s[end + 1..]) == 3 && digits(&s[end + 4..]) == 0 && first <= 3 {
        n = n * 1000 + s[end + 1..end + 4].parse::<u64>().ok()?;
        end += 4;
    }
    let mut rest = &s[end..];
    if rest.starts_with('.') && rest[1..].starts_with(|c: char| c.is_ascii_digit()) {
        return None; // a fraction
    }
    let mut unit = None;
    if let Some(after) = rest.strip_prefix(' ') {
        let word: String = after.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        let scaled = match word.as_str() {
            "bytes" | "byte" => Some((1, Unit::Bytes)),
            "KiB" => Some((1 << 10, Unit::Bytes)),
            "MiB" => Some((1 << 20, Unit::Bytes)),
            "GiB" => Some((1 << 30, Unit::Bytes)),
            "ms" => Some((1, Unit::Ms)),
            "s" => Some((1000, Unit::Ms)),
            _ => None,
        };
        if let Some((scale, u)) = scaled {
            n *= scale;
            unit = Some(u);
            rest = &after[word.len()..];
        }
    }
    // An expression or a range is no value of its own: `2 × ...`, `1 .. 64`.
    let next = rest.trim_start();
    if ["×", "+", "*", "-", "..", "%"].iter().any(|op| next.starts_with(op)) {
        return None;
    }
    Some((Value { n, unit }, rest))
}

/// The cells of a table row.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// Words in backquotes that may name a limit: `core.max_frame`,
/// `config::X`, `queue_limit` (not `"id"`, `8388608`, `docs/X.md`).
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':')
                && !w.ends_with(".rs")
                && !w.ends_with(".md")
        })
        .map(String::from)
        .collect()
}

fn is_constant(name: &str) -> bool {
    let last = name.rsplit("::").next().unwrap_or(name);
    last.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && last.chars().any(|c| c.is_ascii_uppercase())
}

/// What the first cell of a limits row says it is about, as a section.
fn row_section(first: &str) -> Option<&'static str> {
    let words: Vec<&str> = first.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |w: &str| words.contains(&w);
    if has("WebSocket") {
        Some("websocket")
    } else if first.contains("http_client") {
        Some("http_client")
    } else if first.contains("health_check") {
        Some("health_check")
    } else if has("HTTP") {
        Some("http")
    } else if has("filesystem") {
        Some("filesystem")
    } else if has("tcp") && has("bridge") {
        Some("tcp")
    } else if has("udp") && has("bridge") {
        Some("udp")
    } else if has("cron") {
        Some("cron")
    } else if first.contains("queue service") {
        Some("queue")
    } else if has("NATS") {
        Some("nats")
    } else if has("shard") || has("shards") {
        Some("shard")
    } else if has("node") || has("nodes") {
        Some("node")
    } else {
        None
    }
}

/// The section of a key table, from the heading above it and its header.
fn table_section(file: &str, heading: &str, header: &str) -> Option<&'static str> {
    if header.contains("websocket") {
        return Some("websocket");
    }
    for s in CONFIG_SECTIONS {
        if heading.contains(&format!("`[{s}]`")) || heading.contains(&format!("`[[{s}]]`")) {
            return Some(s);
        }
    }
    if heading.contains("`filesystem`") {
        Some("filesystem")
    } else if heading.contains("`tcp`") {
        Some("tcp")
    } else if heading.contains("`udp`") {
        Some("udp")
    } else if heading.contains("`http_client`") {
        Some("http_client")
    } else if heading.contains("`health_check`") {
        Some("health_check")
    } else if heading.contains("`cron`") {
        Some("cron")
    } else if heading.contains("`queue`") {
        Some("queue")
    } else if file.ends_with("GATEWAY.md") {
        Some("http")
    } else {
        None
    }
}

struct Resolver {
    defaults: BTreeMap<String, u64>,
    /// Every name of a constant → the name reported.
    aliases: BTreeMap<String, String>,
}

impl Resolver {
    fn new() -> Resolver {
        let mut aliases = BTreeMap::new();
        for (names, _) in constants() {
            for n in names {
                aliases.insert(n.to_string(), names[0].to_string());
            }
        }
        Resolver { defaults: config_defaults(), aliases }
    }

    /// The limit a name in a row stands for, if it is one; an error for a
    /// constant written with its path that is not known here.
    fn limit(&self, name: &str, section: Option<&str>) -> Result<Option<String>, String> {
        if is_constant(name) {
            let last = name.rsplit("::").next().unwrap();
            return match self.aliases.get(last) {
                Some(l) => Ok(Some(l.clone())),
                None if name.contains("::") => Err(format!(
                    "`{name}` is given a number but is not among the constants this test compares with the code \
                     (core/tests/docs_limits.rs `constants`)"
                )),
                None => Ok(None), // a frame or a status (`HELLO`, `QUEUE_FULL`)
            };
        }
        if let Some((first, _)) = name.split_once('.') {
            return Ok(CONFIG_SECTIONS.contains(&first).then(|| name.to_string()));
        }
        let id = match section {
            Some(s) => format!("{s}.{name}"),
            None => {
                let homes: Vec<String> = CONFIG_SECTIONS
                    .iter()
                    .map(|s| format!("{s}.{name}"))
                    .filter(|k| self.defaults.contains_key(k))
                    .collect();
                match homes.len() {
                    0 => return Ok(None),
                    1 => homes[0].clone(),
                    _ => return Err(format!("`{name}` is a key of several sections ({}): name one", homes.join(", "))),
                }
            }
        };
        Ok(Some(self.aliases.get(&id).cloned().unwrap_or(id)))
    }
}

/// Every limit given a number in the tables of one document, and the
/// problems met on the way (`file:line: why`).
fn mentions(file: &str, text: &str, r: &Resolver, problems: &mut Vec<String>) -> Vec<Mention> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut heading = "";
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('#') {
            heading = lines[i];
        }
        if !lines[i].starts_with('|') {
            i += 1;
            continue;
        }
        let header: Vec<String> = cells(lines[i]).iter().map(|h| h.to_lowercase()).collect();
        i += 2; // the header and its |---| line
        let col = |want: &dyn Fn(&str) -> bool| header.iter().position(|h| want(h));
        let key_col = col(&|h| h == "key" || h.starts_with("setting"));
        let value_col = col(&|h| h == "default").or_else(|| col(&|h| h == "limit"));
        let Some(value_col) = value_col else {
            while i < lines.len() && lines[i].starts_with('|') {
                i += 1;
            }
            continue;
        };
        let name_col = match key_col {
            Some(_) => None,
            None => col(&|h| h == "where").or_else(|| {
                header.iter().enumerate().position(|(j, h)| j != value_col && (h == "limit" || h == "what"))
            }),
        };
        let skip_col = |j: usize| Some(j) == key_col || header[j] == "meaning" || header[j] == "shown by";
        let section = key_col.and_then(|_| table_section(file, heading, &header.join(" ")));
        while i < lines.len() && lines[i].starts_with('|') {
            let row = cells(lines[i]);
            let at = format!("{file}:{}", i + 1);
            i += 1;
            if row.len() != header.len() {
                problems.push(format!("{at}: {} cells under a header of {}", row.len(), header.len()));
                continue;
            }
            let mut two_values = None;
            let mut add =
                |name: &str, value: Value, literal: Option<u64>, section: Option<&str>| match r.limit(name, section) {
                    Ok(Some(limit)) => out.push(Mention { at: at.clone(), limit, value, literal }),
                    Ok(None) => {}
                    Err(why) => problems.push(format!("{at}: {why}")),
                };
            // A key table: `key` | `default`.
            if let Some(k) = key_col {
                let keys = names(&row[k]);
                let default = &row[value_col];
                if let (1, Some(lit)) = (keys.len(), default.strip_prefix('`')) {
                    if let Some((v, rest)) = quantity(lit) {
                        if let Some(rest) = rest.strip_prefix('`') {
                            let literal = v.n;
                            let mut value = v;
                            if let Some((unit_value, _)) = quantity(&format!("1{rest}")) {
                                value = Value { n: literal * unit_value.n, unit: unit_value.unit };
                            }
                            // `8388608` (8 MiB): the two say the same.
                            if let Some((paren, _)) = rest.strip_prefix(" (").and_then(quantity) {
                                if !paren.agrees(&value) {
                                    two_values = Some(format!("{at}: `{}`: {default} is two values", keys[0]));
                                }
                                value.unit = value.unit.or(paren.unit);
                            }
                            add(&keys[0], value, Some(literal), section);
                        }
                    }
                }
            }
            // A limits table: names in order, values in order.
            if let Some(n) = name_col {
                let names: Vec<String> = names(&row[n]);
                let section = row_section(&row[0]);
                let parts: Vec<Option<Value>> = row[value_col]
                    .replace("; ", ", ")
                    .replace(" / ", ", ")
                    .split(", ")
                    .map(|p| p.trim_start_matches("≤").trim())
                    .filter(|p| !p.is_empty())
                    .map(|p| quantity(p).map(|(v, _)| v))
                    .collect();
                if !names.is_empty() && parts.len() >= names.len() && parts[..names.len()].iter().all(Option::is_some) {
                    for (name, v) in names.iter().zip(&parts) {
                        add(name, v.unwrap(), None, section);
                    }
                }
            }
            // Anywhere in such a table: a name next to its number.
            let section = section.or_else(|| row_section(&row[0]));
            for (_, cell) in row.iter().enumerate().filter(|(j, _)| !skip_col(*j)) {
                for (name, value) in inline(cell) {
                    add(&name, value, None, section);
                }
            }
            problems.extend(two_values);
        }
    }
    out
}

/// Names written next to a number in one cell: `` 256 (`MAX_NODES`) ``,
/// `` 1,048,576 requests, `config::X` ``, `` `queue_limit` (1024) ``,
/// `` `cache_size` 64 MiB ``.
fn inline(cell: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let pieces: Vec<&str> = cell.split('`').collect();
    // pieces at odd indexes are in backquotes
    for k in (1..pieces.len()).step_by(2) {
        let name = pieces[k];
        if names(&format!("`{name}`")).is_empty() {
            continue;
        }
        // after: `name` (N ...  or  `name` N ...
        if let Some(after) = pieces.get(k + 1) {
            let after = after.strip_prefix(" (").or_else(|| after.strip_prefix(' '));
            if let Some((v, _)) = after.and_then(quantity) {
                out.push((name.to_string(), v));
                continue;
            }
        }
        // before: N (`name`  or  N unit, `name`  or  N words, `name`
        let before = pieces[k - 1];
        let Some(lead) = before.strip_suffix(" (").or_else(|| before.strip_suffix(", ")) else { continue };
        // the last number of `lead`, with at most one word after it
        let tail: Vec<&str> = lead.rsplitn(3, ' ').collect();
        for take in [1, 2] {
            if tail.len() < take {
                break;
            }
            let start = lead.len() - tail[..take].iter().map(|t| t.len()).sum::<usize>() - (take - 1);
            let candidate = lead[start..].trim_start_matches(['(', '[']);
            if let Some((v, rest)) = quantity(candidate) {
                if rest.is_empty() || (take == 2 && rest.trim().chars().all(|c| c.is_ascii_alphabetic())) {
                    out.push((name.to_string(), v));
                    break;
                }
            }
        }
    }
    out
}

/// What disagrees among the mentions, and with the code.
fn disagreements(all: &[Mention], r: &Resolver) -> Vec<String> {
    let mut found = Vec::new();
    let code: BTreeMap<String, u64> =
        constants().into_iter().map(|(names, v)| (names[0].to_string(), v)).chain(r.defaults.clone()).collect();
    let mut by_limit: BTreeMap<&str, Vec<&Mention>> = BTreeMap::new();
    for m in all {
        by_limit.entry(&m.limit).or_default().push(m);
    }
    for (limit, ms) in by_limit {
        let first = ms[0];
        if let Some(other) = ms.iter().find(|m| !m.value.agrees(&first.value)) {
            let said: Vec<String> = ms.iter().map(|m| format!("{} says {}", m.at, m.value)).collect();
            found.push(format!(
                "`{limit}` is given different values ({} vs {}): {}",
                first.value,
                other.value,
                said.join("; ")
            ));
        }
        if let Some(&want) = code.get(limit) {
            for m in &ms {
                // A key's default as the file holds it; a constant as it is.
                let doc = if CONFIG_SECTIONS.iter().any(|s| limit.starts_with(&format!("{s}."))) {
                    match m.literal {
                        Some(l) => l,
                        None => continue,
                    }
                } else {
                    m.value.n
                };
                if doc != want {
                    found.push(format!("{}: `{limit}` is documented as {doc}; the code's is {want}", m.at));
                }
            }
        }
    }
    found
}

fn check(docs: &[(String, String)]) -> (Vec<Mention>, Vec<String>) {
    let r = Resolver::new();
    let mut problems = Vec::new();
    let mut all = Vec::new();
    for (file, text) in docs {
        all.extend(mentions(file, text, &r, &mut problems));
    }
    problems.extend(disagreements(&all, &r));
    (all, problems)
}

#[test]
fn every_limit_the_docs_give_agrees_across_documents_and_with_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let docs: Vec<(String, String)> = DOCS
        .iter()
        .map(|d| (format!("docs/{d}"), std::fs::read_to_string(root.join("docs").join(d)).unwrap()))
        .collect();
    let (all, problems) = check(&docs);
    if std::env::var_os("DOCS_LIMITS_LIST").is_some() {
        for m in &all {
            eprintln!("{}: {} = {}", m.at, m.limit, m.value);
        }
    }
    // The tables were found and read (a parser that finds nothing passes).
    let limits: std::collections::BTreeSet<&str> = all.iter().map(|m| m.limit.as_str()).collect();
    assert!(all.len() > 100 && limits.len() > 60, "{} values of {} limits found", all.len(), limits.len());
    for file in DOCS.iter().take(4) {
        assert!(all.iter().any(|m| m.at.contains(file)), "no limit found in {file}");
    }
    assert!(problems.is_empty(), "limits the docs disagree on:\n{}", problems.join("\n"));
}

#[test]
fn the_check_finds_limits_that_disagree() {
    let doc = |name: &str, text: &str| (name.to_string(), text.to_string());
    let docs = [
        doc(
            "a.md",
            "## `[core]`\n\n| key | default | meaning |\n|---|---|---|\n\
             | `max_frame` | `8388608` (8 MiB) | ok |\n| `max_outbox` | `1000` | not the code's |\n\
             | `max_parked` | `10000` (8 KiB) | two values |\n\n\
             ## Limits\n\n| what | limit | past it |\n|---|---|---|\n\
             | requests in flight to one node | 1024 (its window) | queued here, up to `queue_limit` (1024), then `QUEUE_FULL` |\n\
             | other nodes | 257 (`MAX_NODES`) | ignored |\n",
        ),
        doc(
            "b.md",
            "## Limits\n\n| limit | default | what happens past it | shown by |\n|---|---|---|---|\n\
             | frame size, `core.max_frame` | 8 MiB | refused | `t` |\n\
             | queue per instance, `queue_limit` / `queue_size` | 1,024 / 64 MiB | refused | `t` |\n\
             | requests in flight to one node | 1024, then its queue (1,048,576 requests, `config::NODE_QUEUE_LIMIT`) | queued | `t` |\n\
             | names | 4096 (`config::NO_SUCH_LIMIT`) | refused | `t` |\n",
        ),
    ];
    let (all, found) = check(&docs);
    let has = |s: &str| found.iter().any(|f| f.contains(s));
    assert!(all.iter().any(|m| m.limit == "service.queue_size" && m.value.n == 64 << 20), "{all:#?}");
    assert!(!has("`core.max_frame`") && !has("`service.queue_limit`"), "8 MiB is 8388608, 1,024 is 1024: {found:#?}");
    assert!(has("a.md:6: `core.max_outbox` is documented as 1000; the code's is 67108864"), "{found:#?}");
    assert!(has("a.md:7: `max_parked`: `10000` (8 KiB) is two values"), "{found:#?}");
    assert!(has("`node.queue_limit` is given different values (1024 vs 1048576)"), "{found:#?}");
    assert!(has("a.md:13: `node.queue_limit` is documented as 1024; the code's is 65536"), "{found:#?}");
    assert!(has("b.md:7: `node.queue_limit` is documented as 1048576; the code's is 65536"), "{found:#?}");
    assert!(has("a.md:14: `MAX_NODES` is documented as 257; the code's is 256"), "{found:#?}");
    assert!(has("b.md:8: `config::NO_SUCH_LIMIT` is given a number but is not among the constants"), "{found:#?}");
    assert_eq!(found.len(), 7, "{found:#?}");
}

#[test]
fn numbers_are_read_as_the_docs_write_them() {
    let v = |s: &str| quantity(s).map(|(v, _)| (v.n, v.unit));
    assert_eq!(v("1,048,576 requests"), Some((1_048_576, None)));
    assert_eq!(v("64 MiB"), Some((64 << 20, Some(Unit::Bytes))));
    assert_eq!(v("67108864"), Some((67_108_864, None)));
    assert_eq!(v("10 s"), Some((10_000, Some(Unit::Ms))));
    assert_eq!(v("4096 bytes"), Some((4096, Some(Unit::Bytes))));
    assert_eq!(v("0.2"), None, "a fraction");
    assert_eq!(v("2 × the most"), None, "an expression");
    assert_eq!(v("1 .. 64"), None, "a range");
    assert_eq!(v("1,0000"), Some((1, None)), "a comma that groups no thousands ends the number");
    assert!(Value { n: 8 << 20, unit: Some(Unit::Bytes) }.agrees(&Value { n: 8 << 20, unit: None }));
    assert!(!Value { n: 1000, unit: Some(Unit::Bytes) }.agrees(&Value { n: 1000, unit: Some(Unit::Ms) }));
}
