use std::fmt;

/// What is wrong with a cron expression or the service's settings: the
/// field it is in (`day-of-month`, `job[2].schedule`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    field: String,
    reason: String,
}

impl CronError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> CronError {
        CronError { field: field.into(), reason: reason.into() }
    }

    pub fn field(&self) -> &str {
        &self.field
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The same error, under an enclosing field: `schedule` + `minutes` is
    /// `schedule: minutes`.
    pub(crate) fn within(self, outer: &str) -> CronError {
        CronError { field: outer.to_string(), reason: self.to_string() }
    }
}

impl fmt::Display for CronError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for CronError {}
