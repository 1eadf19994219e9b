//! The set of live name positions as a bitmap, one bit per position
//! (0 to the name's length), for the case the scan of `Matcher::occurrences`
//! is slow in: many live positions (one per `/`-free run of a name with many
//! slashes) and short blocks that occur in most runs. There each block took
//! a byte-by-byte pass over the name; here a `?` is one addition over the
//! bitmap's words and a block of m bytes is m shift-and passes (Shift-And)
//! over the words between the least and the greatest live position, 64
//! positions per operation.
//!
//! The bitmaps of the name (where each byte occurs, where the slashes are)
//! are built on first use and kept in [`Bitmaps`] across the patterns tried
//! against one name, so that a lookup pays for them once.

/// Longest block run through the bitmap (a block of m bytes costs m passes
/// here); longer ones take the other ways, whose cost grows more slowly
/// with the block.
pub(super) const MAX_BLOCK: usize = 64;

/// The bitmap of the name's positions holding byte `c` (`!c`: not
/// holding it), eight bytes at a time.
fn positions(n: &[u8], words: usize, c: u8, not: bool) -> Box<[u64]> {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let spread = 0x0101_0101_0101_0101 * c as u64;
    let mut m = vec![0u64; words];
    for (w, chunk) in n.chunks(64).enumerate() {
        let mut bits = 0u64;
        for (j, eight) in chunk.chunks(8).enumerate() {
            let mut buf = [0u8; 8];
            buf[..eight.len()].copy_from_slice(eight);
            let x = u64::from_le_bytes(buf) ^ spread;
            // 0x80 in each byte of `x` that is zero (exact: no carries
            // cross bytes), then those eight bits gathered into one byte.
            let zero = !(((x & LOW7) + LOW7) | x | LOW7);
            bits |= (zero.wrapping_mul(0x0002_0408_1020_4081) >> 56) << (8 * j);
        }
        let valid = if chunk.len() == 64 { !0 } else { (1u64 << chunk.len()) - 1 };
        m[w] = if not { !bits & valid } else { bits & valid };
    }
    m.into()
}

/// A name's bitmaps and the live set.
#[derive(Debug, Default)]
pub(super) struct Bitmaps {
    /// Words per bitmap: bits 0 to the name's length.
    words: usize,
    /// Bit i: byte i of the name is not `/` (never set at or past the end).
    nonslash: Box<[u64]>,
    /// Where the name's slashes are, ascending, then the name's length:
    /// the ends of its runs.
    run_ends: Option<Box<[usize]>>,
    /// Per byte value, the positions holding it; built on first use.
    bytes: Vec<Option<Box<[u64]>>>,
    /// The live positions: where the next wildcard may start.
    live: Vec<u64>,
    /// Words of `live` that may be non-zero: `lo..=hi` (`lo > hi`: none).
    lo: usize,
    hi: usize,
}

impl Bitmaps {
    /// Builds the slash bitmap on first use; the steps it took.
    fn ready(&mut self, n: &[u8]) -> u64 {
        if self.words > 0 {
            return 0;
        }
        self.words = n.len() / 64 + 1;
        self.nonslash = positions(n, self.words, b'/', true);
        self.bytes = vec![None; 256];
        self.live = vec![0; self.words];
        (self.lo, self.hi) = (1, 0);
        (self.words + n.len() / 16) as u64
    }

    /// Makes `starts` (ascending) the live set; the steps it took (those
    /// making the name's bitmaps go to `setup`).
    pub(super) fn load(&mut self, n: &[u8], starts: &[usize], setup: &mut u64) -> u64 {
        *setup += self.ready(n);
        let steps = self.clear();
        for &s in starts {
            self.live[s / 64] |= 1 << (s % 64);
        }
        self.lo = starts[0] / 64;
        self.hi = starts[starts.len() - 1] / 64;
        steps + starts.len() as u64
    }

    fn clear(&mut self) -> u64 {
        if self.lo > self.hi {
            return 0;
        }
        self.live[self.lo..=self.hi].fill(0);
        let steps = (self.hi - self.lo + 1) as u64;
        (self.lo, self.hi) = (1, 0);
        steps
    }

    /// The least live position and how many are live (the live ones the
    /// scan would need, one per run, are at most that many).
    pub(super) fn lowest_and_count(&self, steps: &mut u64) -> (usize, usize) {
        *steps += (self.hi + 1 - self.lo.min(self.hi + 1)) as u64;
        let count = self.live[self.lo..=self.hi].iter().map(|w| w.count_ones() as usize).sum();
        (self.lowest().unwrap_or(0), count)
    }

    fn lowest(&self) -> Option<usize> {
        (self.lo..=self.hi).find(|&w| self.live[w] != 0).map(|w| w * 64 + self.live[w].trailing_zeros() as usize)
    }

    /// Drops the empty words at both ends of `lo..=hi`; false if all are.
    fn trim(&mut self) -> bool {
        while self.lo <= self.hi && self.live[self.lo] == 0 {
            self.lo += 1;
        }
        while self.hi > self.lo && self.live[self.hi] == 0 {
            self.hi -= 1;
        }
        self.lo <= self.hi
    }

    /// A wildcard from the live positions: `*` takes one or more bytes of
    /// any kind (from the least live position on), `?` one or more bytes
    /// other than `/`. False if nothing is live after it.
    pub(super) fn wildcard(&mut self, wild: u8, len: usize, steps: &mut u64) -> bool {
        if wild == b'*' {
            let Some(p) = self.lowest() else { return false };
            *steps += self.clear();
            if p >= len {
                return false;
            }
            let (lo, hi) = ((p + 1) / 64, len / 64);
            self.live[lo..=hi].fill(!0);
            self.live[lo] &= !0 << ((p + 1) % 64);
            self.live[hi] &= !0 >> (63 - len % 64);
            (self.lo, self.hi) = (lo, hi);
            *steps += (hi - lo + 1) as u64;
            return true;
        }
        // `?`: within each `/`-free run, every position after the least
        // live one, up to the run's end (the `/`, or the name's end). Adding
        // the live positions of a run to its bits carries a 1 from the least
        // one through the rest of the run and into the position after it:
        // the bits carried into are exactly those positions.
        let mut carry = 0u64;
        let mut w = self.lo;
        let mut last = None;
        while w < self.words && (w <= self.hi || carry != 0) {
            let m = self.nonslash[w];
            let x = self.live[w] & m;
            let (s, o1) = m.overflowing_add(x);
            let (s, o2) = s.overflowing_add(carry);
            self.live[w] = s ^ m ^ x;
            carry = (o1 | o2) as u64;
            if self.live[w] != 0 {
                last = Some(w);
            }
            w += 1;
        }
        *steps += (w - self.lo) as u64 + 1;
        match last {
            Some(hi) => {
                self.hi = hi;
                self.trim()
            }
            None => {
                (self.lo, self.hi) = (1, 0);
                false
            }
        }
    }

    /// A block from the live positions (Shift-And, one pass per byte):
    /// afterwards the live positions are the ends of its occurrences that
    /// start at a live position. False if there are none.
    pub(super) fn block(&mut self, n: &[u8], block: &[u8], steps: &mut u64, setup: &mut u64) -> bool {
        for &c in block {
            let mask = self.bytes[c as usize].get_or_insert_with(|| {
                *setup += (self.words + n.len() / 16) as u64;
                positions(n, self.words, c, false)
            });
            // Positions move up by one: the word past `hi` may receive a bit
            // (never past the name's end, whose bit no mask has).
            let top = (self.hi + 1).min(self.words - 1);
            // The carry from word to word is the input's top bit, not the
            // output's: no chain through the arithmetic.
            let mut carry = 0;
            for (l, &k) in self.live[self.lo..=top].iter_mut().zip(&mask[self.lo..=top]) {
                let x = *l & k;
                *l = (x << 1) | carry;
                carry = x >> 63;
            }
            *steps += (top - self.lo + 1) as u64;
            self.hi = top;
            if !self.trim() {
                return false;
            }
        }
        true
    }

    /// The ends of the name's `/`-free runs (each `/`, then the name's
    /// end), ascending; made on first use.
    pub(super) fn run_ends(&mut self, n: &[u8], setup: &mut u64) -> &[usize] {
        self.run_ends.get_or_insert_with(|| {
            *setup += n.len() as u64 / 16 + 1;
            memchr::memchr_iter(b'/', n).chain([n.len()]).collect()
        })
    }

    /// Whether position `p` is live.
    pub(super) fn has(&self, p: usize) -> bool {
        self.lo <= self.hi && p / 64 >= self.lo && p / 64 <= self.hi && self.live[p / 64] >> (p % 64) & 1 == 1
    }

    /// The live positions the scan needs: the least of each `/`-free run
    /// (only the least of all if `only_first`), ascending.
    pub(super) fn starts(&self, n: &[u8], only_first: bool, steps: &mut u64) -> Vec<usize> {
        let mut out = Vec::new();
        let mut w = self.lo;
        let mut from = self.lo * 64;
        while w <= self.hi && w < self.words {
            let bits = self.live[w] & (!0u64).checked_shl((from - w * 64) as u32).unwrap_or(0);
            *steps += 1;
            if bits == 0 {
                w += 1;
                from = w * 64;
                continue;
            }
            let p = w * 64 + bits.trailing_zeros() as usize;
            out.push(p);
            if only_first {
                break;
            }
            // Skip the rest of p's run: on from the position after its end.
            from = self.run_end(p, n.len(), steps) + 1;
            w = from / 64;
        }
        out
    }

    /// The first position at or after `p` that is a `/` or the name's end.
    fn run_end(&self, p: usize, len: usize, steps: &mut u64) -> usize {
        let mut w = p / 64;
        let mut bits = !self.nonslash[w] >> (p % 64);
        if bits != 0 {
            return (p + bits.trailing_zeros() as usize).min(len);
        }
        loop {
            w += 1;
            *steps += 1;
            if w >= self.words {
                return len;
            }
            bits = !self.nonslash[w];
            if bits != 0 {
                return (w * 64 + bits.trailing_zeros() as usize).min(len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn positions_are_those_of_the_byte() {
        let mut rng = fastrand::Rng::with_seed(3);
        for len in 0..300 {
            let n: Vec<u8> = (0..len).map(|_| [b'a', b'/', 0x80, 0xff, 0x7f, 1][rng.usize(..6)]).collect();
            let words = len / 64 + 1;
            for c in [b'a', b'/', 0x80, 0xff, 0x7f, 1, b'z'] {
                let (is, not) = (super::positions(&n, words, c, false), super::positions(&n, words, c, true));
                for i in 0..words * 64 {
                    let bit = |m: &[u64]| m[i / 64] >> (i % 64) & 1 == 1;
                    assert_eq!(bit(&is), i < len && n[i] == c, "{c} at {i} of {len}");
                    assert_eq!(bit(&not), i < len && n[i] != c, "not {c} at {i} of {len}");
                }
            }
        }
    }
}
