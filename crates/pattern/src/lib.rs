//! Service names and patterns (PROTOCOL.md 6), as the router, the config
//! and the cluster check and match them:
//! - the limits on names and patterns and their validation;
//! - the matcher, bounded in steps whatever the pattern;
//! - [`PrefixIndex`]: wildcard patterns indexed by their literal prefix, so
//!   that a lookup tries only the patterns that can match.

mod matcher;
mod prefix_index;

#[cfg(any(test, feature = "test-util"))]
pub use matcher::reference_matches;
pub use matcher::{
    has_wildcard, literal_len, literal_prefix, literal_suffix, matches, matches_counted, validate, wildcard_count,
    Name, NameLimits, DEFAULT_MAX_NAME, DEFAULT_MAX_PATTERN, DEFAULT_MAX_WILDCARDS,
};
pub use prefix_index::{PrefixIndex, Shape};
