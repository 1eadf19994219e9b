//! Service names and patterns (PROTOCOL.md 6): `*` matches one or more
//! characters of any kind, `?` one or more characters other than `/`; no two
//! wildcards side by side.
//!
//! Names and patterns come from peers, so both their size and the cost of
//! matching one against the other are bounded: [`NameLimits`] refuses what is
//! too long or has too many wildcards, and [`matches`] runs in
//! O(wildcards x name + pattern) steps whatever the pattern (see there).

/// Default longest name, bytes. The HTTP gateway turns a URL path into a
/// name (prefix + path + `/method`): 4 KiB holds any URL a site links to
/// (sitemaps and most CDNs stop at 2 KiB), and it bounds the cost of a
/// lookup, which reads the name about once per wildcard of each candidate
/// pattern.
pub const DEFAULT_MAX_NAME: u32 = 4096;
/// Default longest pattern (prefix included), bytes: as long as the longest
/// name, since an exact pattern is a name.
pub const DEFAULT_MAX_PATTERN: u32 = 4096;
/// Default most wildcards in one pattern. Real patterns have a handful
/// (`/api/?/items/*`); matching costs up to one pass over the name per
/// wildcard, so this bounds the cost of one pattern at 8 passes.
pub const DEFAULT_MAX_WILDCARDS: u32 = 8;

/// How long names and patterns may be (the `[core]` keys `max_name`,
/// `max_pattern`, `max_wildcards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NameLimits {
    pub max_name: usize,
    pub max_pattern: usize,
    pub max_wildcards: usize,
}

impl Default for NameLimits {
    fn default() -> Self {
        NameLimits {
            max_name: DEFAULT_MAX_NAME as usize,
            max_pattern: DEFAULT_MAX_PATTERN as usize,
            max_wildcards: DEFAULT_MAX_WILDCARDS as usize,
        }
    }
}

impl NameLimits {
    /// Checks a name a request is sent to; the error says what is wrong.
    pub fn check_name(&self, name: &str) -> Result<(), String> {
        if name.is_empty() {
            return Err("the service name is empty".into());
        }
        if name.contains('\0') {
            return Err(format!("the service name '{}' contains a NUL byte", shown(name)));
        }
        if name.len() > self.max_name {
            return Err(format!(
                "the service name '{}' is {} bytes long, over the limit of {} (core.max_name)",
                shown(name),
                name.len(),
                self.max_name
            ));
        }
        Ok(())
    }

    /// Checks a full pattern (prefix included) before it is subscribed.
    pub fn check_pattern(&self, pattern: &str) -> Result<(), String> {
        if pattern.len() > self.max_pattern {
            return Err(format!(
                "the pattern '{}' is {} bytes long, over the limit of {} (core.max_pattern)",
                shown(pattern),
                pattern.len(),
                self.max_pattern
            ));
        }
        validate(pattern)?;
        let wildcards = wildcard_count(pattern);
        if wildcards > self.max_wildcards {
            return Err(format!(
                "the pattern '{}' has {wildcards} wildcards, over the limit of {} (core.max_wildcards)",
                shown(pattern),
                self.max_wildcards
            ));
        }
        Ok(())
    }
}

/// Longest part of a refused name or pattern quoted in an error, bytes: the
/// message must stay readable (and small) whatever was sent.
const SHOWN: usize = 64;

/// The start of a long string, for error messages.
fn shown(s: &str) -> String {
    if s.len() <= SHOWN {
        return s.escape_debug().to_string();
    }
    let mut end = SHOWN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", s[..end].escape_debug())
}

/// Checks a full pattern; the error says what is wrong.
pub fn validate(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("pattern is empty".into());
    }
    if pattern.contains('\0') {
        return Err("pattern contains a NUL byte".into());
    }
    let b = pattern.as_bytes();
    for w in b.windows(2) {
        if is_wild(w[0]) && is_wild(w[1]) {
            return Err(format!(
                "invalid pattern '{}': two wildcards side by side ('{}{}')",
                shown(pattern),
                w[0] as char,
                w[1] as char
            ));
        }
    }
    Ok(())
}

#[inline]
fn is_wild(c: u8) -> bool {
    c == b'*' || c == b'?'
}

pub fn has_wildcard(pattern: &str) -> bool {
    pattern.bytes().any(is_wild)
}

pub fn wildcard_count(pattern: &str) -> usize {
    pattern.bytes().filter(|&c| is_wild(c)).count()
}

/// How specific a pattern is: its count of literal characters.
pub fn literal_len(pattern: &str) -> usize {
    pattern.bytes().filter(|&c| !is_wild(c)).count()
}

/// The literal characters before a pattern's first wildcard (all of it if it
/// has none): every name it matches starts with them.
pub fn literal_prefix(pattern: &str) -> &str {
    &pattern[..pattern.bytes().position(is_wild).unwrap_or(pattern.len())]
}

/// The literal characters after a pattern's last wildcard: every name it
/// matches ends with them.
pub fn literal_suffix(pattern: &str) -> &str {
    &pattern[pattern.bytes().rposition(is_wild).map_or(0, |i| i + 1)..]
}

/// Does `name` match the (validated) `pattern`?
pub fn matches(pattern: &str, name: &str) -> bool {
    Name::new(name).matches(pattern)
}

/// [`matches`], with the steps it took (bytes compared or scanned, bitmap
/// words read), for the tests that bound them.
///
/// The pattern is literal blocks between wildcards: `B0 w1 B1 w2 ... wk Bk`.
/// The state after each block is a set of name positions where the next
/// wildcard may start. `?` cannot cross `/`, so after a `?` the reachable
/// positions are one interval per `/`-free run of the name; and for the
/// wildcard after a block, only the least position in each `/`-free run
/// matters (a `?` from it reaches all that a later one in the same run
/// reaches; a `*` needs only the least of all). So the state is at most one
/// position per run, and each block is found with one forward pass over the
/// name that never goes back:
/// - a block followed by `*` after a `*`: the first occurrence at or after
///   the one reachable interval (greedy leftmost, `memchr::memmem`, linear);
/// - otherwise every occurrence, overlapping ones included, through a KMP
///   scan (memchr has no overlapping search, hence the hand-written one),
///   keeping the first per run and skipping the rest of a run without
///   reading it when that lies ahead of the scan.
///
/// That scan reads the name once per wildcard, slowly where it finds a
/// block in every run (a byte at a time); so each wildcard and its block
/// take whichever of three ways costs less (`Matcher::way`): that scan; per
/// live position, the block looked for in its run only (a `?` cannot
/// leave it; a block with a `/` has one place to be); or Shift-And over a
/// bitmap of the live positions, 64 per word operation (`bits`).
///
/// Greedy leftmost alone is wrong after `?`: `*b?c` must match `xb/byc`,
/// where the first `b` leads the `?` into a `/`.
///
/// Each of the k wildcards costs at most one pass over the name plus the
/// next block's length (KMP: twice the bytes scanned, plus the table; the
/// other ways are taken where they cost less), so the whole match is
/// O(k x name + pattern), k being at most `max_wildcards`;
/// `tests::steps_are_bounded_on_adversarial_inputs` holds it to
/// `4 (k + 1)(name + 1) + 4 pattern`.
pub fn matches_counted(pattern: &str, name: &str) -> (bool, u64) {
    let mut prepared = Name::new(name);
    let (found, steps) = prepared.matches_counted(pattern);
    (found, steps + prepared.setup_steps)
}

/// Live positions from which a `?` may go through the bitmap: below it the
/// other ways, which look only at the runs concerned, cost less.
const MANY_STARTS: usize = 4;
/// Bytes after a `*` from which its block (followed by `?`, so that every
/// occurrence counts) is found through the bitmap.
const WIDE: usize = 256;

/// How a wildcard and the block after it are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// The forward scan over the name (`reach`, `first_occurrence`,
    /// `occurrences`).
    Scan,
    /// A `?` from each live position, the block looked for in its run only
    /// (`per_start`).
    PerStart,
    /// Shift-And over the bitmap of live positions (`bits`).
    Bitmap,
}

/// A name prepared to be matched against several patterns (a lookup tries
/// every candidate against one name): the bitmaps the matcher makes of it
/// are made once.
#[derive(Debug)]
pub struct Name<'a> {
    n: &'a [u8],
    maps: bits::Bitmaps,
    /// Steps spent on the bitmaps of the name, counted apart.
    setup_steps: u64,
    /// The way every step takes where it can (tests), else chosen by cost.
    force: Option<Way>,
}

impl<'a> Name<'a> {
    pub fn new(name: &'a str) -> Self {
        Name { n: name.as_bytes(), maps: bits::Bitmaps::default(), setup_steps: 0, force: None }
    }

    /// A name matched the one `way` wherever it applies, so that the tests
    /// compare each way with the reference on small inputs.
    #[cfg(test)]
    fn forcing(name: &'a str, way: Way) -> Self {
        Name { force: Some(way), ..Name::new(name) }
    }

    /// A name matched by the forward scan alone (the matcher before the
    /// per-start and bitmap ways), for tests that compare costs.
    #[cfg(any(test, feature = "test-util"))]
    pub fn scan_only(name: &'a str) -> Self {
        Name { force: Some(Way::Scan), ..Name::new(name) }
    }

    /// Does this name match the (validated) `pattern`?
    pub fn matches(&mut self, pattern: &str) -> bool {
        self.matches_counted(pattern).0
    }

    /// [`Name::matches`] with its steps, those spent making the name's
    /// bitmaps left out ([`Name::setup_steps`]).
    pub fn matches_counted(&mut self, pattern: &str) -> (bool, u64) {
        let mut m = Matcher { n: self.n, steps: 0, setup: 0, maps: &mut self.maps, force: self.force };
        let found = m.run(pattern.as_bytes());
        let steps = m.steps;
        self.setup_steps += m.setup;
        (found, steps)
    }

    /// Steps spent making the name's bitmaps so far (once per name and byte
    /// value, whatever the number of patterns).
    pub fn setup_steps(&self) -> u64 {
        self.setup_steps
    }
}

mod bits;

/// Inclusive ranges of name positions, sorted and disjoint.
type Spans = Vec<(usize, usize)>;

struct Matcher<'a> {
    n: &'a [u8],
    steps: u64,
    /// Steps spent on the name's bitmaps.
    setup: u64,
    maps: &'a mut bits::Bitmaps,
    force: Option<Way>,
}

impl Matcher<'_> {
    fn run(&mut self, p: &[u8]) -> bool {
        let n = self.n;
        let Some(first) = p.iter().position(|&c| is_wild(c)) else {
            self.steps += p.len().min(n.len()) as u64 + 1;
            return p == n;
        };
        let head = &p[..first];
        self.steps += head.len() as u64 + 1;
        if !n.starts_with(head) {
            return false;
        }
        let mut starts = vec![head.len()];
        // Whether the live positions are in `maps` rather than `starts`.
        let mut in_bits = false;
        let mut rest = &p[first..];
        loop {
            let (wild, after) = (rest[0], &rest[1..]);
            let len = after.iter().position(|&c| is_wild(c)).unwrap_or(after.len());
            let block = &after[..len];
            self.steps += len as u64 + 1;
            if len == 0 && len < after.len() {
                // Two wildcards side by side: refused by `validate`, never
                // subscribed; matching nothing keeps the scans below simple.
                return false;
            }
            let last = len == after.len();
            let one_end = last || after[len] == b'*';
            let way = if in_bits {
                let (lowest, live) = self.maps.lowest_and_count(&mut self.steps);
                self.way(wild, len, last, one_end, lowest, live)
            } else {
                self.way(wild, len, last, one_end, starts[0], starts.len())
            };
            if in_bits && way != Way::Bitmap {
                starts = self.maps.starts(n, wild == b'*', &mut self.steps);
                in_bits = false;
            }
            if way == Way::Bitmap && !in_bits {
                self.steps += self.maps.load(n, &starts, &mut self.setup);
                in_bits = true;
            }
            if in_bits {
                if !self.maps.wildcard(wild, n.len(), &mut self.steps) {
                    return false;
                }
                if last {
                    let Some(q) = n.len().checked_sub(len) else { return false };
                    self.steps += len as u64 + 1;
                    return n.ends_with(block) && self.maps.has(q);
                }
                if !self.maps.block(n, block, &mut self.steps, &mut self.setup) {
                    return false;
                }
                rest = &after[len..];
                continue;
            }
            if way == Way::PerStart {
                starts = self.per_start(block, &starts, one_end);
                if starts.is_empty() {
                    return false;
                }
                rest = &after[len..];
                continue;
            }
            let reach = self.reach(wild, &starts);
            if reach.is_empty() {
                return false;
            }
            if len == after.len() {
                // The last block ends the name and starts inside `reach`.
                let Some(q) = n.len().checked_sub(block.len()) else { return false };
                self.steps += block.len() as u64 + reach.len() as u64;
                return n.ends_with(block) && reach.iter().any(|&(a, b)| a <= q && q <= b);
            }
            starts = if after[len] == b'*' && reach.len() == 1 {
                self.first_occurrence(block, reach[0])
            } else {
                self.occurrences(block, &reach, after[len] == b'*')
            };
            if starts.is_empty() {
                return false;
            }
            rest = &after[len..];
        }
    }

    /// The way for a wildcard from `live` positions (the least at
    /// `lowest`) and the block of `len` bytes after it, by what each would
    /// cost, in fifths of a nanosecond as measured on 4 KiB names:
    /// - the scan: a pass over the name, twice its bytes, 0.6 ns each;
    /// - per start: a look into each live position's run, 4 ns and the
    ///   block compared 16 bytes a nanosecond;
    /// - the bitmap: a pass over its words per byte of the block, 0.6 ns a
    ///   word; for blocks of at most 64 bytes after several live positions.
    fn way(&self, wild: u8, len: usize, last: bool, one_end: bool, lowest: usize, live: usize) -> Way {
        let n = self.n.len();
        match self.force {
            Some(Way::PerStart) if wild == b'?' && !last => return Way::PerStart,
            Some(Way::Bitmap) => return Way::Bitmap,
            Some(_) => return Way::Scan,
            None => {}
        }
        if wild == b'*' {
            let wide = !one_end && n - lowest >= WIDE && len <= bits::MAX_BLOCK;
            return if wide { Way::Bitmap } else { Way::Scan };
        }
        if last {
            // One more `?`, then a comparison at the name's end.
            return if live >= MANY_STARTS { Way::Bitmap } else { Way::Scan };
        }
        let scan = 6 * n;
        let per_start = live * (20 + len / 3);
        let bitmap = if len <= bits::MAX_BLOCK && live >= MANY_STARTS { 3 * len * (n / 64 + 1) } else { usize::MAX };
        if bitmap < per_start.min(scan) {
            Way::Bitmap
        } else if per_start <= scan {
            Way::PerStart
        } else {
            Way::Scan
        }
    }

    /// A `?` from each of `starts` (ascending, at most one per run), then
    /// `block`, looked for in that start's run only: the `?` cannot leave
    /// it. A block with a `/` has one place, its first `/` on the run's
    /// end; one without lies inside the run, after one byte at least. The
    /// ends found are one per run, ascending (only the first if
    /// `only_first`).
    fn per_start(&mut self, block: &[u8], starts: &[usize], only_first: bool) -> Vec<usize> {
        let n = self.n;
        let m = block.len();
        let slash = memchr::memchr(b'/', block);
        let finder = slash.is_none().then(|| memchr::memmem::Finder::new(block));
        self.steps += m as u64 + 1;
        // The runs' ends, walked along with the starts (both ascending).
        let ends = self.maps.run_ends(n, &mut self.setup);
        let mut r = 0;
        let mut out = Vec::with_capacity(starts.len());
        for &s in starts {
            while ends[r] < s {
                r += 1;
                self.steps += 1;
            }
            let end = ends[r];
            match slash {
                Some(f) => {
                    let Some(q) = end.checked_sub(f).filter(|&q| q > s) else { continue };
                    // Compared eight bytes at a time.
                    self.steps += m.div_ceil(8) as u64 + 1;
                    if n[q..].starts_with(block) {
                        out.push(q + m);
                    }
                }
                None => {
                    let hay = &n[(s + 1).min(end)..end];
                    let found = finder.as_ref().and_then(|f| f.find(hay));
                    self.steps += found.map_or(hay.len(), |i| i + m) as u64 + 1;
                    if let Some(i) = found {
                        out.push(s + 1 + i + m);
                    }
                }
            }
            if only_first && !out.is_empty() {
                break;
            }
        }
        out
    }

    /// Where a wildcard starting at one of `starts` (at most one per run,
    /// ascending) may end, i.e. where the next block may begin.
    fn reach(&mut self, wild: u8, starts: &[usize]) -> Spans {
        let len = self.n.len();
        if wild == b'*' {
            return if starts[0] < len { vec![(starts[0] + 1, len)] } else { Vec::new() };
        }
        let mut out = Vec::with_capacity(starts.len());
        for &p in starts {
            let end = self.run_end(p);
            if end > p {
                out.push((p + 1, end));
            }
        }
        out
    }

    /// The index of the first `/` at or after `p`, or the name's length: the
    /// end of the `/`-free run that position `p` belongs to.
    fn run_end(&mut self, p: usize) -> usize {
        let n = self.n;
        // Most runs are short (path segments): a plain loop first, memchr
        // (whose call costs more than a few bytes) for the long ones.
        let mut end = p.min(n.len());
        let short = (end + 16).min(n.len());
        while end < short && n[end] != b'/' {
            end += 1;
        }
        if end == short && end < n.len() {
            end = memchr::memchr(b'/', &n[end..]).map_or(n.len(), |i| end + i);
        }
        self.steps += (end - p.min(end)) as u64 + 1;
        end
    }

    /// The end of the first occurrence of `block` starting inside `span`
    /// (the next wildcard is a `*`: only the least position matters).
    fn first_occurrence(&mut self, block: &[u8], (from, to): (usize, usize)) -> Vec<usize> {
        let len = self.n.len();
        let hay = &self.n[from.min(len)..(to + block.len()).min(len)];
        match memchr::memmem::find(hay, block) {
            Some(i) => {
                self.steps += (i + 2 * block.len()) as u64 + 1;
                vec![from + i + block.len()]
            }
            None => {
                self.steps += (hay.len() + block.len()) as u64 + 1;
                Vec::new()
            }
        }
    }

    /// The ends of the occurrences of `block` that start inside `reach`: the
    /// least one per `/`-free run (only the first at all if `only_first`).
    fn occurrences(&mut self, block: &[u8], reach: &Spans, only_first: bool) -> Vec<usize> {
        let n = self.n;
        let m = block.len();
        let lo = reach[0].0;
        let hi = (reach[reach.len() - 1].1 + m).min(n.len());
        // The KMP table is built only if a partial match must be carried on.
        let mut fail: Vec<usize> = Vec::new();
        let finder = memchr::memmem::Finder::new(block);
        self.steps += m as u64;
        let mut out = Vec::new();
        // Positions at or before `covered` end in a run already kept.
        let mut covered: Option<usize> = None;
        let mut span = 0;
        let (mut i, mut k) = (lo, 0usize);
        while i < hi {
            if k == 0 {
                // Nothing can start in a gap between spans: skip it.
                while span < reach.len() && reach[span].1 < i {
                    span += 1;
                }
                if span == reach.len() {
                    break;
                }
                i = i.max(reach[span].0);
                // No partial match pending: jump to the next occurrence with
                // memmem. The occurrences found so are disjoint (each starts
                // where the scan is, past the last one), so these searches
                // cost O(name) in all.
                let Some(d) = finder.find(&n[i..hi]) else {
                    self.steps += (hi - i) as u64 + 1;
                    break;
                };
                self.steps += (d + m) as u64 + 1;
                i += d + m;
                k = m;
            } else {
                self.steps += 1;
                if fail.is_empty() {
                    fail = failure_table(block);
                    self.steps += 2 * m as u64;
                }
                if n[i] != block[k] {
                    k = fail[k - 1];
                    continue;
                }
                i += 1;
                k += 1;
            }
            if k < m {
                continue;
            }
            {
                let (q, end) = (i - m, i);
                k = if m == 1 { 0 } else { 1 };
                if k == 1 {
                    if fail.is_empty() {
                        fail = failure_table(block);
                        self.steps += 2 * m as u64;
                    }
                    k = fail[m - 1];
                }
                while span < reach.len() && reach[span].1 < q {
                    span += 1;
                }
                if span == reach.len() {
                    break;
                }
                if q < reach[span].0 || covered.is_some_and(|c| end <= c) {
                    continue;
                }
                out.push(end);
                if only_first {
                    break;
                }
                let run = self.run_end(end);
                covered = Some(run);
                if run >= hi {
                    break; // every later occurrence ends in this run
                }
                // The next useful occurrence ends past `run`, so starts past
                // `run - m`: jump there if that is ahead of the scan.
                if run + 1 >= m && run + 1 - m > i {
                    i = run + 1 - m;
                    k = 0;
                }
            }
        }
        out
    }
}

/// KMP failure function: `t[k]` is the length of the longest proper prefix
/// of `block[..=k]` that is also its suffix.
fn failure_table(block: &[u8]) -> Vec<usize> {
    let mut t = vec![0; block.len()];
    let mut k = 0;
    for i in 1..block.len() {
        while k > 0 && block[i] != block[k] {
            k = t[k - 1];
        }
        if block[i] == block[k] {
            k += 1;
        }
        t[i] = k;
    }
    t
}

/// The former matcher, kept as the reference the new one is checked
/// against (unit tests and the `pattern` fuzz target): dynamic programming
/// over the set of name positions reachable after each pattern character,
/// O(pattern x name) in every case.
#[cfg(any(test, feature = "test-util"))]
pub fn reference_matches(pattern: &str, name: &str) -> bool {
    let n = name.as_bytes();
    let mut reach = vec![false; n.len() + 1];
    let mut next = vec![false; n.len() + 1];
    reach[0] = true;
    for &c in pattern.as_bytes() {
        next[0] = false;
        match c {
            b'*' => {
                let mut any = false;
                for j in 1..=n.len() {
                    any |= reach[j - 1];
                    next[j] = any;
                }
            }
            b'?' => {
                let mut carry = false;
                for j in 1..=n.len() {
                    carry = (carry || reach[j - 1]) && n[j - 1] != b'/';
                    next[j] = carry;
                }
            }
            lit => {
                for j in 1..=n.len() {
                    next[j] = reach[j - 1] && n[j - 1] == lit;
                }
            }
        }
        std::mem::swap(&mut reach, &mut next);
        if !reach.iter().any(|&r| r) {
            return false;
        }
    }
    reach[n.len()]
}

#[cfg(test)]
mod tests;
