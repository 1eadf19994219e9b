//! Every configuration key the docs name exists in the config the core
//! reads (`core/src/config.rs`, `core/src/cluster/config.rs`), in the
//! section the docs put it in, so the docs cannot drift from the code.
//!
//! A key is checked by parsing a config that sets it, with the real
//! `Config` type: each of its tables refuses unknown fields, so an unknown
//! key is an "unknown field" error, while a known one set to a value of the
//! wrong type is another error. No list of keys is kept here to go stale.
//!
//! What counts as a key named in the docs:
//! - a row of a table under a `## [section]` heading of CONFIG.md
//!   (`| `key` | ...`, or several keys in one cell);
//! - `section.key` anywhere in docs/*.md, proto/PROTOCOL.md or README.md,
//!   for the config's sections (`core`, `admin`, `cluster`, `service`);
//! - `other.key` in backquotes where `key` is a config key but `other` is
//!   no section of the config (a key named under the wrong section).

use cumulo_config::Config;
use std::path::Path;

const SECTIONS: &[&str] = &["core", "admin", "cluster", "service", "tracing"];
/// OpenTelemetry's names (resource and span attributes, docs/TRACING.md)
/// that read like `section.key` but are no config key.
const OTEL_NAMES: &[&str] = &["service.name", "url.path", "client.address", "cumulo.node"];
/// `name.ext` in the docs that are file names, not keys.
const FILE_EXTENSIONS: &[&str] = &["rs", "md", "toml", "json", "py", "sh", "txt", "html", "svg", "log", "lua", "conf"];

/// Whether `key` is a key of `section` (`core.unmanaged` is `["core", "unmanaged"]`).
fn known(section: &str, key: &str) -> bool {
    let doc = if section == "service" {
        format!("[[service]]\n{key} = {{}}\n")
    } else {
        format!("[{section}]\n{key} = {{}}\n")
    };
    match toml::from_str::<Config>(&doc) {
        Ok(_) => true,
        Err(e) => !e.to_string().contains("unknown field"),
    }
}

fn known_anywhere(key: &str) -> bool {
    SECTIONS.iter().any(|s| known(s, key))
}

/// `a.b` words of `line`: (a, b, whether in backquotes); `a.b.c` gives `a.b`.
fn dotted_words(line: &str) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut word = String::new();
    let mut flush = |word: &mut String, in_code: bool| {
        let parts: Vec<&str> = word.split('.').collect();
        if parts.len() >= 2 && !parts[0].is_empty() && !parts[1].is_empty() && !FILE_EXTENSIONS.contains(&parts[1]) {
            out.push((parts[0].to_string(), parts[1].to_string(), in_code));
        }
        word.clear();
    };
    for ch in line.chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '_' || (ch == '.' && !word.is_empty()) {
            word.push(ch);
            continue;
        }
        // A word glued to what precedes it ("docs/CONFIG.md", "x::y") is a path.
        flush(&mut word, in_code);
        if ch == '`' {
            in_code = !in_code;
        }
    }
    flush(&mut word, in_code);
    out
}

/// The problems in one document's text: `file:line: why`.
fn problems(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut table_section: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let at = format!("{file}:{}", n + 1);
        if let Some(heading) = line.strip_prefix("## ") {
            // "## `[core]`", "## `[[service]]`": the section of the rows below.
            let name = heading.trim_matches(|c| c == '`' || c == '[' || c == ']' || c == ' ');
            table_section = SECTIONS.contains(&name).then(|| name.to_string());
        }
        if let (Some(section), Some(cell)) = (&table_section, line.strip_prefix("| `")) {
            let first_cell = cell.split(" |").next().unwrap_or("");
            for key in first_cell.split('`').map(str::trim).filter(|k| !k.is_empty() && *k != ",") {
                // "[core.unmanaged]": a sub-table of the section.
                let key = key.trim_matches(|c| c == '[' || c == ']');
                let key = key.strip_prefix(&format!("{section}.")).unwrap_or(key);
                if !known(section, key) {
                    found.push(format!("{at}: `{key}` is listed under [{section}] but is no key of it"));
                }
            }
        }
        for (first, second, in_code) in dotted_words(line) {
            let first_trimmed = first.trim_start_matches('.');
            // `settings.x`: an internal service's setting, checked by its crate.
            if first_trimmed == "settings" || OTEL_NAMES.contains(&format!("{first_trimmed}.{second}").as_str()) {
                continue;
            }
            if SECTIONS.contains(&first_trimmed) {
                if !known(first_trimmed, &second) {
                    found.push(format!("{at}: `{first_trimmed}.{second}` is no config key"));
                }
            } else if in_code && known_anywhere(&second) {
                let home: Vec<&str> = SECTIONS.iter().copied().filter(|s| known(s, &second)).collect();
                found.push(format!(
                    "{at}: `{first_trimmed}.{second}`: there is no [{first_trimmed}] section; `{second}` is a key of [{}]",
                    home.join("], [")
                ));
            }
        }
    }
    found
}

#[test]
fn every_config_key_named_in_the_docs_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.push(root.join("proto/PROTOCOL.md"));
    files.push(root.join("README.md"));
    let mut found = Vec::new();
    let mut table_rows = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let name = path.strip_prefix(root).unwrap().display().to_string();
        if name.ends_with("CONFIG.md") {
            table_rows = text.lines().filter(|l| l.starts_with("| `")).count();
        }
        found.extend(problems(&name, &text));
    }
    assert!(table_rows > 30, "docs/CONFIG.md's key tables were not found ({table_rows} rows)");
    assert!(found.is_empty(), "config keys in the docs that config.rs does not have:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_keys_that_do_not_exist() {
    let doc = "## `[core]`\n\n| key | default |\n|---|---|\n| `max_frame` | 8 MiB |\n| `no_such_key` | 1 |\n\
               | `[core.unmanaged]` | defaults |\n\n## `[cluster]`\n\n| `user`, `password` | none |\n\n\
               Refused (`listener.allow_unmanaged = false`), see core.max_outbox and core.max_outboxes; \
               `settings.pattern`, `metrics.rs`, docs/CONFIG.md.\n";
    let found = problems("doc.md", doc);
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found[0].starts_with("doc.md:6: `no_such_key`"), "{found:#?}");
    assert!(found[1].contains("`listener.allow_unmanaged`: there is no [listener] section"), "{found:#?}");
    assert!(found[2].contains("`core.max_outboxes` is no config key"), "{found:#?}");
}
