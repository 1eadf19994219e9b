//! The router's side of shards (the core on several threads; the threads,
//! the channels and the serving of handed-over connections are the node's):
//! other shards are pseudo-instances here, like other nodes.
//!
//! - `handoff`: which shard serves an instance shard 0 admitted, and the
//!   orders shard 0 gives it;
//! - `mirror`: which instance of another shard subscribes what (multicast
//!   copies, one per instance there);
//! - `turns`: the round-robin cursors every shard shares.

pub mod handoff;
pub mod mirror;
pub mod turns;

use cumulo_config::DestRefresh;

/// Between shards, the bits of a REQUEST's flags above the protocol's carry
/// the sender's dest_refresh (its discriminant plus one, `DestRefresh::ALL`), so
/// that the receiving shard picks among its instances as the sender asked
/// (round robin stays one rotation whichever shard a request came from).
/// The receiving shard takes them off: no instance sees them.
const POLICY_SHIFT: u32 = 3;
/// The flags' bits the protocol defines (proto/PROTOCOL.md, REQUEST.flags).
pub const FLAGS_MASK: u8 = (1 << POLICY_SHIFT) - 1;

/// The flag bits that carry `how` to another shard.
pub fn policy_bits(how: DestRefresh) -> u8 {
    (how as u8 + 1) << POLICY_SHIFT
}

/// The dest_refresh another shard's request carries, if any.
pub fn policy_of(flags: u8) -> Option<DestRefresh> {
    match flags >> POLICY_SHIFT {
        0 => Option::None,
        n => DestRefresh::ALL.get(n as usize - 1).copied(),
    }
}
