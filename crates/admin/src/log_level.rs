//! Changing the log level of a running core (`PUT /v1/log-level`): the
//! binary installs a reloadable filter and hands the core a way to swap it.

use std::cell::RefCell;

type Apply = Box<dyn Fn(&str) -> Result<(), String>>;

pub struct LogControl {
    current: RefCell<String>,
    apply: Option<Apply>,
}

impl LogControl {
    /// `apply` installs a new filter (already checked by `check_filter`).
    pub fn new(initial: &str, apply: impl Fn(&str) -> Result<(), String> + 'static) -> LogControl {
        LogControl { current: RefCell::new(initial.to_string()), apply: Some(Box::new(apply)) }
    }

    /// A level that cannot be changed (a core embedded without reloading).
    pub fn fixed(initial: &str) -> LogControl {
        LogControl { current: RefCell::new(initial.to_string()), apply: None }
    }

    pub fn current(&self) -> String {
        self.current.borrow().clone()
    }

    /// Sets a new filter; returns the previous one.
    pub fn set(&self, filter: &str) -> Result<String, String> {
        check_filter(filter)?;
        let apply = self.apply.as_ref().ok_or("this core was started without a reloadable log filter")?;
        apply(filter)?;
        Ok(self.current.replace(filter.to_string()))
    }
}

const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// A filter is a comma-separated list of `LEVEL` or `TARGET=LEVEL`
/// ("info,cumulo_router::routing=debug"). Checked strictly: a bare word that
/// is no level would otherwise be read as a target and silence everything.
pub fn check_filter(filter: &str) -> Result<(), String> {
    let directives: Vec<&str> = filter.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
    if directives.is_empty() {
        return Err(
            "empty log level: give one of off, error, warn, info, debug, trace (or TARGET=LEVEL directives)".into()
        );
    }
    for d in directives {
        let (target, level) = match d.split_once('=') {
            Some((t, l)) => (Some(t), l),
            None => (None, d),
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(format!("'{level}' is not a log level (one of {})", LEVELS.join(", ")));
        }
        if let Some(t) = target {
            let ok = !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "_:-.".contains(c));
            if !ok {
                return Err(format!("'{t}' is not a target (letters, digits, _ : - . as in cumulo_router::routing)"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_directives() {
        for ok in ["debug", "WARN", "info,cumulo_router::routing=trace", "service=off, info"] {
            assert!(check_filter(ok).is_ok(), "{ok}");
        }
        for (bad, why) in
            [("", "empty"), ("loud", "not a log level"), ("a b=info", "not a target"), ("x=verbose", "not a log level")]
        {
            let e = check_filter(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn set_applies_and_remembers() {
        let seen = std::rc::Rc::new(RefCell::new(Vec::new()));
        let s2 = seen.clone();
        let c = LogControl::new("info", move |f| {
            s2.borrow_mut().push(f.to_string());
            Ok(())
        });
        assert_eq!(c.set("debug").unwrap(), "info");
        assert_eq!(c.current(), "debug");
        assert!(c.set("nonsense").is_err());
        assert_eq!(*seen.borrow(), vec!["debug".to_string()]);
        assert!(LogControl::fixed("info").set("debug").unwrap_err().contains("without a reloadable"));
    }
}
