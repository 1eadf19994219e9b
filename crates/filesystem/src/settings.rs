//! The settings of `internal = "filesystem"` (docs/CONFIG.md).

use std::path::PathBuf;
use std::time::Duration;

pub struct Settings {
    /// Canonical: every file served is under it once links are resolved.
    pub directory: PathBuf,
    pub index: String,
    pub cache_size: u64,
    pub cache_file_max: u64,
    pub refresh: Duration,
    pub max_answer: u64,
}

const KNOWN: &[&str] = &["directory", "index", "cache_size", "cache_file_max", "refresh_ms", "max_answer"];

impl Settings {
    pub fn from_settings(t: &toml::Table) -> Result<Settings, String> {
        if let Some(k) = t.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("filesystem: unknown setting '{k}' (known: {})", KNOWN.join(", ")));
        }
        let directory = match t.get("directory") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(_) => return Err("filesystem: settings.directory must be a string".into()),
            None => return Err("filesystem: settings.directory is required (the directory to serve)".into()),
        };
        let directory = PathBuf::from(&directory)
            .canonicalize()
            .map_err(|e| format!("filesystem: settings.directory '{directory}': {e}"))?;
        if !directory.is_dir() {
            return Err(format!("filesystem: settings.directory '{}' is not a directory", directory.display()));
        }
        let index = match t.get("index") {
            None => "index.html".to_string(),
            Some(toml::Value::String(s)) if !s.contains('/') && s != ".." => s.clone(),
            Some(_) => return Err("filesystem: settings.index must be a file name (no '/'), or \"\" for none".into()),
        };
        let int = |key: &str, default: u64, min: u64, max: u64| -> Result<u64, String> {
            match t.get(key) {
                None => Ok(default),
                Some(toml::Value::Integer(n)) if (min as i64..=max as i64).contains(n) => Ok(*n as u64),
                Some(_) => Err(format!("filesystem: settings.{key} must be an integer in {min} ..= {max}")),
            }
        };
        let cache_size = int("cache_size", 64 << 20, 0, 1 << 40)?;
        let cache_file_max = int("cache_file_max", 1 << 20, 0, 1 << 30)?;
        let refresh = Duration::from_millis(int("refresh_ms", 1000, 0, 86_400_000)?);
        let max_answer = int("max_answer", 4 << 20, 1024, 1 << 30)?;
        if cache_file_max > max_answer {
            return Err(format!(
                "filesystem: settings.cache_file_max ({cache_file_max}) must not be over settings.max_answer ({max_answer})"
            ));
        }
        Ok(Settings { directory, index, cache_size, cache_file_max, refresh, max_answer })
    }
}
