//! A set of statuses in one word: tested once per outcome.

use cumulo_proto::Status;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusSet(u32);

impl StatusSet {
    pub fn of(statuses: &[Status]) -> StatusSet {
        StatusSet(statuses.iter().fold(0, |bits, s| bits | bit(*s)))
    }

    #[inline]
    pub fn contains(self, status: Status) -> bool {
        self.0 & bit(status) != 0
    }

    /// Whether any status of `other` is in this set.
    pub fn meets(self, other: StatusSet) -> bool {
        self.0 & other.0 != 0
    }

    pub fn names(self) -> Vec<&'static str> {
        (0..32u16).map(Status::from_code).filter(|s| self.contains(*s)).map(Status::name).collect()
    }
}

#[inline]
fn bit(status: Status) -> u32 {
    match status.code() {
        c @ 0..=31 => 1 << c,
        _ => 0,
    }
}
