//! W3C Trace Context (https://www.w3.org/TR/trace-context/) as request_info
//! carries it: the `traceparent` pair, `00-<trace-id>-<parent-id>-<flags>`
//! in lower-case hex. A few lines of parsing are all the format needs, and
//! they must run on the event loop without allocating, so they are written
//! here rather than taken from an OpenTelemetry propagator (which works on
//! a map of strings).

use cumulo_proto::info;

pub const TRACEPARENT: &[u8] = b"traceparent";
pub const TRACESTATE: &[u8] = b"tracestate";
/// The encoded length of a version-00 traceparent.
const LEN: usize = 55;
const SAMPLED: u8 = 0x01;

/// A `traceparent`: the trace, the span that is the parent of the next
/// one, and the flags (bit 0: sampled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// Parses a version-00 value (a later version's first 55 bytes, as the
    /// spec asks); None for anything else, or an all-zero id.
    pub fn parse(v: &[u8]) -> Option<TraceParent> {
        if v.len() < LEN || (v.len() > LEN && (v[0..2] == *b"00" || v[LEN] != b'-')) {
            return None;
        }
        if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' || v[0..2] == *b"ff" {
            return None;
        }
        let version = hex::<1>(&v[0..2])?;
        let trace_id = hex::<16>(&v[3..35])?;
        let span_id = hex::<8>(&v[36..52])?;
        let flags = hex::<1>(&v[53..55])?[0];
        if version[0] == 0xff || trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent { trace_id, span_id, flags })
    }

    pub fn sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// The same trace and flags, with `span_id` as the parent.
    pub fn child(&self, span_id: [u8; 8]) -> TraceParent {
        TraceParent { span_id, ..*self }
    }

    /// A new trace, sampled or not.
    pub fn root(sampled: bool) -> TraceParent {
        TraceParent { trace_id: new_trace_id(), span_id: new_span_id(), flags: if sampled { SAMPLED } else { 0 } }
    }

    /// The value, `00-…-…-..` (always version 00: what this side writes).
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        out[0..3].copy_from_slice(b"00-");
        put_hex(&mut out[3..35], &self.trace_id);
        out[35] = b'-';
        put_hex(&mut out[36..52], &self.span_id);
        out[52] = b'-';
        put_hex(&mut out[53..55], &[self.flags]);
        out
    }

    pub fn to_header(&self) -> String {
        String::from_utf8_lossy(&self.encode()).into_owned()
    }
}

/// The request's traceparent and where its value starts in `info`, or None
/// (no key, a malformed value or a malformed info). A request without one,
/// the common case, costs one substring search.
pub fn find(info: &[u8]) -> Option<(TraceParent, usize)> {
    // Built once: `memmem::find_iter` would build its searcher per call.
    static KEY: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"traceparent\0"));
    // A match is the key when it starts a pair: at the start or after a
    // NUL, with an even number of NULs before it (keys and values
    // alternate, each ended by one). Counted with memchr as the matches
    // come, not by walking the pairs byte by byte: the gateway's
    // request_info holds every header.
    let (mut counted, mut nuls) = (0, 0);
    for hit in KEY.find_iter(info) {
        nuls += memchr::memchr_iter(0, &info[counted..hit]).count();
        counted = hit;
        if nuls % 2 == 0 && (hit == 0 || info[hit - 1] == 0) {
            let value_at = hit + TRACEPARENT.len() + 1;
            let end = value_at + memchr::memchr(0, &info[value_at..])?;
            return TraceParent::parse(&info[value_at..end]).map(|tp| (tp, value_at));
        }
    }
    None
}

/// `info` with its traceparent (whose value starts at `at`, from `find`)
/// naming `parent` instead: trace-id, flags and every other pair kept.
pub fn with_parent(info: &[u8], at: usize, parent: &TraceParent) -> Vec<u8> {
    let mut out = Vec::with_capacity(info.len());
    out.extend_from_slice(&info[..at]);
    out.extend_from_slice(&parent.encode());
    // A later version's extra fields are dropped with its version: this
    // side writes 00, which has none.
    let end = at + info[at..].iter().position(|&c| c == 0).unwrap_or(info.len() - at);
    out.extend_from_slice(&info[end..]);
    out
}

/// `info` with a traceparent pair appended (it had none).
pub fn append(info: &[u8], parent: &TraceParent) -> Vec<u8> {
    let mut out = Vec::with_capacity(info.len() + TRACEPARENT.len() + LEN + 2);
    out.extend_from_slice(info);
    info::push(&mut out, TRACEPARENT, &parent.encode());
    out
}

/// A random trace id, never all zeros. fastrand (wyrand) is enough: ids
/// must be unique, not secret, and this runs on the event loop.
pub fn new_trace_id() -> [u8; 16] {
    loop {
        let id = fastrand::u128(..).to_be_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

pub fn new_span_id() -> [u8; 8] {
    loop {
        let id = fastrand::u64(..).to_be_bytes();
        if id != [0; 8] {
            return id;
        }
    }
}

/// Lower-case hex digits' values; 0xff for every other byte (upper case is
/// invalid in traceparent). A table: this runs for every request that
/// carries a context.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

fn hex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut bad = 0u8;
    for (b, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
        let (hi, lo) = (HEX[pair[0] as usize], HEX[pair[1] as usize]);
        bad |= hi | lo;
        *b = hi << 4 | (lo & 0x0f);
    }
    // Any invalid digit set the high bits.
    (bad & 0xf0 == 0).then_some(out)
}

fn put_hex(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = DIGITS[(b & 15) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_encodes_the_specs_example() {
        let tp = TraceParent::parse(TP.as_bytes()).unwrap();
        assert_eq!(tp.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(tp.sampled());
        assert_eq!(&tp.encode()[..], TP.as_bytes());
    }

    #[test]
    fn refuses_what_the_spec_refuses() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad}");
        }
        // A later version may carry more, after a dash.
        assert!(TraceParent::parse(format!("01{}-more", &TP[2..]).as_bytes()).is_some());
    }

    #[test]
    fn finds_it_at_a_pair_boundary_only() {
        let info = info::encode(&[("a", "traceparent"), ("traceparent", TP), ("tracestate", "k=v")]);
        let (tp, at) = find(&info).unwrap();
        assert_eq!(&info[at..at + 55], TP.as_bytes());
        assert!(tp.sampled());
        // A value that reads "traceparent\0" is not the key, nor a longer key.
        let info = info::encode(&[("x", "traceparent"), (TP, "y")]);
        assert_eq!(find(&info), None);
        let info = info::encode(&[("xtraceparent", TP), ("a", "traceparent"), ("traceparent", TP)]);
        let (_, at) = find(&info).unwrap();
        assert_eq!(at, info.len() - 56, "the real key, after a longer one and a value");
        let info = info::encode(&[("traceparent", "00-bad")]);
        assert_eq!(find(&info), None);
        assert_eq!(find(b""), None);
    }

    #[test]
    fn rewrites_the_parent_and_keeps_everything_else() {
        let info = info::encode(&[("a", "1"), ("traceparent", TP), ("tracestate", "k=v")]);
        let (tp, at) = find(&info).unwrap();
        let child = tp.child([1, 2, 3, 4, 5, 6, 7, 8]);
        let out = with_parent(&info, at, &child);
        let want = "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01";
        assert_eq!(out, info::encode(&[("a", "1"), ("traceparent", want), ("tracestate", "k=v")]));
        let appended = append(b"a\x001\x00", &child);
        assert_eq!(appended, info::encode(&[("a", "1"), ("traceparent", want)]));
    }
}
