//! The core's layering (docs/ARCHITECTURE.md, "Layers"), checked on its
//! sources: a module that reaches into a layer it must not fails this test,
//! naming the file, the line and the rule.
//!
//! - The internal services' settings checks (`internal::settings`, handed
//!   to the config crate as its catalogue) are leaves: no state, routing or
//!   `InternalApi`. (The config itself is a crate below the core: its
//!   manifest keeps it there.)
//! - The internal services still in the core (the gateway, echo) reach the
//!   core through `InternalApi` only: they name none of the core's listener,
//!   supervisor, admin or cluster modules, and of the router only a
//!   request, its answer and the metrics text writer.
//!
//! Within one crate the compiler cannot forbid a module another's public
//! items, so the rules are checked here on the `use` paths; between crates
//! the manifests keep them (tests/architecture.rs): the routing hot path is
//! the router crate, whose manifest names no HTTP, NATS or WebSocket
//! library.

use std::path::{Path, PathBuf};

struct Rule {
    name: &'static str,
    /// Files (relative to core/src) or folders (ending in '/').
    files: &'static [&'static str],
    /// Of those, files the rule does not apply to.
    except_files: &'static [&'static str],
    /// Text a line of code of those files may not hold...
    forbidden: &'static [&'static str],
    /// ...unless it holds one of these at the same place.
    allowed: &'static [&'static str],
}

const RULES: &[Rule] = &[
    Rule {
        name: "the internal services' settings checks are leaves",
        files: &["internal/settings.rs", "internal/http/settings.rs"],
        except_files: &[],
        forbidden: &[
            "crate::state",
            "crate::routing",
            "crate::instance",
            "InternalApi",
            "super::api",
            "crate::supervisor",
        ],
        allowed: &[],
    },
    Rule {
        name: "internal services reach the core through InternalApi only",
        files: &["internal/"],
        // The API itself, the registry of services, and the fuzzing entry
        // that connects a gateway to a core made for the fuzz target.
        except_files: &["internal/api.rs", "internal/mod.rs", "internal/http/fuzzing.rs"],
        forbidden: &[
            "crate::state",
            "crate::routing",
            "crate::registry",
            "crate::listener",
            "crate::supervisor",
            "crate::daemon",
            "crate::admin",
            "cumulo_cluster",
            // The router (its state, registry, routing) but for the types
            // of a request, its answer and the metrics text writer.
            "cumulo_router",
        ],
        allowed: &["cumulo_router::Response", "cumulo_router::OwnedRequest", "cumulo_router::PromText"],
    },
];

/// The lines of code of `text` (comments dropped) that break `rule`.
fn violations(rule: &Rule, file: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for bad in rule.forbidden {
            let hit = code.match_indices(bad).any(|(at, _)| !rule.allowed.iter().any(|ok| code[at..].starts_with(ok)));
            if hit {
                out.push(format!("{file}:{}: `{bad}` ({}): {}", n + 1, rule.name, line.trim()));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_core_keeps_its_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for rule in RULES {
        let mut matched = 0;
        // Every file or folder a rule names exists: a rule cannot outlive a move.
        for f in rule.files.iter().chain(rule.except_files) {
            assert!(src.join(f).exists(), "rule '{}' names {f}, which is not in core/src", rule.name);
        }
        for path in &files {
            let rel = path.strip_prefix(&src).unwrap().display().to_string();
            let applies = rule.files.iter().any(|f| if f.ends_with('/') { rel.starts_with(f) } else { rel == *f });
            if !applies || rule.except_files.contains(&rel.as_str()) {
                continue;
            }
            matched += 1;
            found.extend(violations(rule, &rel, &std::fs::read_to_string(path).unwrap()));
        }
        assert!(matched >= rule.files.len().min(3), "rule '{}' found too few files ({matched})", rule.name);
    }
    assert!(found.is_empty(), "layering broken:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_a_module_reaching_past_its_layer() {
    let text = "use crate::internal::settings::KNOWN; // fine\n\
                use crate::internal::api::InternalApi;\n\
                // crate::state in a comment is fine\n\
                fn f(c: &crate::state::Core) {}\n";
    let found = violations(&RULES[0], "internal/settings.rs", text);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("internal/settings.rs:2: `InternalApi`"), "{found:#?}");
    assert!(found[1].starts_with("internal/settings.rs:4: `crate::state`"), "{found:#?}");
    let found = violations(&RULES[1], "internal/echo.rs", "use cumulo_router::Core;\nuse cumulo_router::Response;\n");
    assert_eq!(found.len(), 1, "{found:#?}");
}
