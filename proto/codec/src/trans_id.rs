//! trans_ids (PROTOCOL.md 2.2): 16 bytes, time-ordered as bytes, unique per
//! core because every instance stamps its own (node_id, instance_id).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TransId(pub [u8; 16]);

impl TransId {
    pub fn new(nanos: u64, node_id: u32, instance_id: u32) -> TransId {
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&nanos.to_be_bytes());
        b[8..12].copy_from_slice(&node_id.to_be_bytes());
        b[12..16].copy_from_slice(&instance_id.to_be_bytes());
        TransId(b)
    }
    pub fn nanos(&self) -> u64 {
        u64::from_be_bytes(self.0[0..8].try_into().unwrap())
    }
    pub fn node_id(&self) -> u32 {
        u32::from_be_bytes(self.0[8..12].try_into().unwrap())
    }
    pub fn instance_id(&self) -> u32 {
        u32::from_be_bytes(self.0[12..16].try_into().unwrap())
    }
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for TransId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Display for TransId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Generates the trans_ids of one instance: strictly increasing nanoseconds.
#[derive(Debug)]
pub struct TransIdGen {
    node_id: u32,
    instance_id: u32,
    last: u64,
}

impl TransIdGen {
    pub fn new(node_id: u32, instance_id: u32) -> Self {
        TransIdGen { node_id, instance_id, last: 0 }
    }
    #[allow(clippy::should_implement_trait, reason = "a generator that never ends, not an iterator")]
    pub fn next(&mut self) -> TransId {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        self.last = if now > self.last { now } else { self.last + 1 };
        TransId::new(self.last, self.node_id, self.instance_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strictly_increasing_and_stamped() {
        let mut g = TransIdGen::new(3, 9);
        let mut prev = g.next();
        for _ in 0..10_000 {
            let t = g.next();
            assert!(t > prev, "{t} not after {prev}");
            assert_eq!((t.node_id(), t.instance_id()), (3, 9));
            prev = t;
        }
    }
}
