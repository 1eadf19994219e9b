//! A decoder for the small part of Erlang's External Term Format that CloudI's
//! language APIs send (tuples of atoms, strings, binaries, integers, booleans
//! and the pid they were given), and the one term the core sends back (a pid).
//!
//! Written by hand on purpose: the crates that exist (eetf) decode every term
//! kind, including compressed terms and bignums, and allocate by the length
//! fields they read; this one accepts only what the APIs send, bounds nesting
//! and never allocates more than the input could hold. `decode` is a plain
//! function over bytes so that it can be fuzzed; it must stay fuzzed.

use std::borrow::Cow;

const VERSION: u8 = 131;
const NEW_FLOAT_EXT: u8 = 70;
const NEW_PID_EXT: u8 = 88;
const SMALL_INTEGER_EXT: u8 = 97;
const INTEGER_EXT: u8 = 98;
const ATOM_EXT: u8 = 100;
const PID_EXT: u8 = 103;
const SMALL_TUPLE_EXT: u8 = 104;
const LARGE_TUPLE_EXT: u8 = 105;
const NIL_EXT: u8 = 106;
const STRING_EXT: u8 = 107;
const LIST_EXT: u8 = 108;
const BINARY_EXT: u8 = 109;
const SMALL_BIG_EXT: u8 = 110;
const SMALL_ATOM_EXT: u8 = 115;
const ATOM_UTF8_EXT: u8 = 118;
const SMALL_ATOM_UTF8_EXT: u8 = 119;

/// Deepest nesting accepted: the APIs send a tuple holding at most a pid, so
/// 8 leaves room while keeping recursion on crafted input shallow.
const MAX_DEPTH: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub enum Term<'a> {
    Atom(&'a [u8]),
    /// Integers up to 64 bits (larger bignums are refused).
    Int(i64),
    Float(f64),
    /// A binary or a string (`STRING_EXT`), borrowed from the input.
    Bytes(&'a [u8]),
    Tuple(Vec<Term<'a>>),
    /// A proper list (`[]` is an empty one).
    List(Vec<Term<'a>>),
    /// A pid, kept as its encoded bytes (tag included): it is only passed back.
    Pid(&'a [u8]),
}

impl<'a> Term<'a> {
    /// The bytes of a string-like term: a binary, a `STRING_EXT`, the empty
    /// list, or a list of integers 0..=255 (how Erlang spells a long string).
    pub fn string_bytes(&self) -> Option<Cow<'a, [u8]>> {
        match self {
            Term::Bytes(b) => Some(Cow::Borrowed(*b)),
            Term::List(items) => items
                .iter()
                .map(|t| match t {
                    Term::Int(i) => u8::try_from(*i).ok(),
                    _ => None,
                })
                .collect::<Option<Vec<u8>>>()
                .map(Cow::Owned),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Term::Atom(b"true") => Some(true),
            Term::Atom(b"false") => Some(false),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Term::Int(i) => Some(*i),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtfError(pub String);

impl std::fmt::Display for EtfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed Erlang term: {}", self.0)
    }
}

fn err<T>(why: impl Into<String>) -> Result<T, EtfError> {
    Err(EtfError(why.into()))
}

/// Decodes one whole term (version byte first); trailing bytes are an error.
pub fn decode(data: &[u8]) -> Result<Term<'_>, EtfError> {
    let mut r = Reader { data, at: 0 };
    if r.u8()? != VERSION {
        return err("does not start with the version byte 131");
    }
    let t = r.term(0)?;
    if r.at != data.len() {
        return err(format!("{} bytes after the term", data.len() - r.at));
    }
    Ok(t)
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], EtfError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.data.len());
        let Some(end) = end else { return err(format!("truncated: {n} bytes wanted at offset {}", self.at)) };
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, EtfError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, EtfError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn u32(&mut self) -> Result<u32, EtfError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn left(&self) -> usize {
        self.data.len() - self.at
    }

    /// `n` elements of at least one byte each: refused before allocating if
    /// the input cannot hold them.
    fn seq(&mut self, n: usize, depth: usize) -> Result<Vec<Term<'a>>, EtfError> {
        if n > self.left() {
            return err(format!("{n} elements announced, {} bytes left", self.left()));
        }
        (0..n).map(|_| self.term(depth + 1)).collect()
    }

    fn atom(&mut self) -> Result<&'a [u8], EtfError> {
        match self.u8()? {
            ATOM_EXT | ATOM_UTF8_EXT => {
                let n = self.u16()? as usize;
                self.take(n)
            }
            SMALL_ATOM_EXT | SMALL_ATOM_UTF8_EXT => {
                let n = self.u8()? as usize;
                self.take(n)
            }
            t => err(format!("expected an atom, got tag {t}")),
        }
    }

    fn term(&mut self, depth: usize) -> Result<Term<'a>, EtfError> {
        if depth > MAX_DEPTH {
            return err(format!("nested deeper than {MAX_DEPTH}"));
        }
        let start = self.at;
        let tag = self.u8()?;
        Ok(match tag {
            SMALL_INTEGER_EXT => Term::Int(self.u8()? as i64),
            INTEGER_EXT => Term::Int(self.u32()? as i32 as i64),
            SMALL_BIG_EXT => {
                let n = self.u8()? as usize;
                let sign = self.u8()?;
                let digits = self.take(n)?;
                if n > 8 || digits[n.min(8)..].iter().any(|d| *d != 0) {
                    return err("integer wider than 64 bits");
                }
                let mut v: u64 = 0;
                for (i, d) in digits.iter().enumerate() {
                    v |= (*d as u64) << (8 * i);
                }
                match sign {
                    0 => Term::Int(i64::try_from(v).map_err(|_| EtfError("integer above i64".into()))?),
                    _ => Term::Int(0i64.checked_sub_unsigned(v).ok_or(EtfError("integer below i64".into()))?),
                }
            }
            NEW_FLOAT_EXT => Term::Float(f64::from_be_bytes(self.take(8)?.try_into().unwrap_or_default())),
            ATOM_EXT | ATOM_UTF8_EXT | SMALL_ATOM_EXT | SMALL_ATOM_UTF8_EXT => {
                self.at = start;
                Term::Atom(self.atom()?)
            }
            SMALL_TUPLE_EXT => {
                let n = self.u8()? as usize;
                Term::Tuple(self.seq(n, depth)?)
            }
            LARGE_TUPLE_EXT => {
                let n = self.u32()? as usize;
                Term::Tuple(self.seq(n, depth)?)
            }
            NIL_EXT => Term::List(Vec::new()),
            STRING_EXT => {
                let n = self.u16()? as usize;
                Term::Bytes(self.take(n)?)
            }
            LIST_EXT => {
                let n = self.u32()? as usize;
                let items = self.seq(n, depth)?;
                if self.u8()? != NIL_EXT {
                    return err("improper list");
                }
                Term::List(items)
            }
            BINARY_EXT => {
                let n = self.u32()? as usize;
                Term::Bytes(self.take(n)?)
            }
            NEW_PID_EXT | PID_EXT => {
                self.atom()?;
                self.take(if tag == NEW_PID_EXT { 12 } else { 9 })?;
                Term::Pid(&self.data[start..self.at])
            }
            t => return err(format!("unsupported term tag {t}")),
        })
    }
}

/// The pid the core hands to an API as a request's `source`: a
/// `NEW_PID_EXT` on node `cumulo@localhost` whose id and serial carry the
/// sender's instance id and node id (the APIs only pass it back).
pub fn encode_pid(out: &mut Vec<u8>, node_id: u32, instance_id: u32) {
    const NODE: &[u8] = b"cumulo@localhost";
    out.push(VERSION);
    out.push(NEW_PID_EXT);
    out.push(ATOM_EXT);
    out.extend_from_slice(&(NODE.len() as u16).to_be_bytes());
    out.extend_from_slice(NODE);
    out.extend_from_slice(&instance_id.to_be_bytes());
    out.extend_from_slice(&node_id.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes()); // creation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atom(s: &str) -> Vec<u8> {
        let mut v = vec![SMALL_ATOM_UTF8_EXT, s.len() as u8];
        v.extend_from_slice(s.as_bytes());
        v
    }

    #[test]
    fn decodes_what_the_apis_send() {
        // {send_sync, "a/b", <<"i">>, <<>>, 5000, -1} as erlang_py writes it.
        let mut t = vec![VERSION, SMALL_TUPLE_EXT, 6, ATOM_EXT, 0, 9];
        t.extend_from_slice(b"send_sync");
        t.extend_from_slice(&[STRING_EXT, 0, 3, b'a', b'/', b'b']);
        t.extend_from_slice(&[BINARY_EXT, 0, 0, 0, 1, b'i']);
        t.extend_from_slice(&[BINARY_EXT, 0, 0, 0, 0]);
        t.extend_from_slice(&[INTEGER_EXT, 0, 0, 0x13, 0x88]);
        t.extend_from_slice(&[INTEGER_EXT, 0xff, 0xff, 0xff, 0xff]);
        let Term::Tuple(items) = decode(&t).unwrap() else { panic!("not a tuple") };
        assert_eq!(items[0], Term::Atom(b"send_sync"));
        assert_eq!(items[1].string_bytes().unwrap().as_ref(), b"a/b");
        assert_eq!(items[2], Term::Bytes(b"i"));
        assert_eq!(items[4].as_int(), Some(5000));
        assert_eq!(items[5].as_int(), Some(-1));
    }

    #[test]
    fn strings_as_lists_bools_bigs_and_pids() {
        let mut t = vec![
            VERSION,
            SMALL_TUPLE_EXT,
            4,
            LIST_EXT,
            0,
            0,
            0,
            2,
            SMALL_INTEGER_EXT,
            b'x',
            SMALL_INTEGER_EXT,
            b'y',
            NIL_EXT,
        ];
        t.extend(atom("true"));
        t.extend_from_slice(&[SMALL_BIG_EXT, 4, 0, 0xff, 0xff, 0xff, 0xff]);
        let mut pid = Vec::new();
        encode_pid(&mut pid, 1, 7);
        t.extend_from_slice(&pid[1..]);
        let Term::Tuple(items) = decode(&t).unwrap() else { panic!("not a tuple") };
        assert_eq!(items[0].string_bytes().unwrap().as_ref(), b"xy");
        assert_eq!(items[1].as_bool(), Some(true));
        assert_eq!(items[2].as_int(), Some(u32::MAX as i64));
        assert_eq!(items[3], Term::Pid(&pid[1..]));
        assert_eq!(decode(&[VERSION, NIL_EXT]).unwrap().string_bytes().unwrap().as_ref(), b"");
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let bad: &[&[u8]] = &[
            b"",
            &[VERSION],
            &[130, NIL_EXT],
            &[VERSION, 200],
            &[VERSION, BINARY_EXT, 0xff, 0xff, 0xff, 0xff],
            &[VERSION, LARGE_TUPLE_EXT, 0xff, 0xff, 0xff, 0xff],
            &[VERSION, LIST_EXT, 0, 0, 0, 1, SMALL_INTEGER_EXT, 1, SMALL_INTEGER_EXT],
            &[VERSION, STRING_EXT, 0, 5, b'a'],
            &[VERSION, SMALL_BIG_EXT, 9, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            &[VERSION, SMALL_BIG_EXT, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0x80],
            &[VERSION, NIL_EXT, NIL_EXT],
            &[VERSION, NEW_PID_EXT, SMALL_ATOM_EXT, 1, b'a', 0, 0],
            &[VERSION, 80, 0, 0, 0, 1, 0],
        ];
        for b in bad {
            assert!(decode(b).is_err(), "{b:?} should be refused");
        }
        // Nesting is bounded.
        let mut deep = vec![VERSION];
        deep.extend(std::iter::repeat_n([SMALL_TUPLE_EXT, 1], 100).flatten());
        deep.push(NIL_EXT);
        assert!(decode(&deep).is_err());
        // Every truncation of a valid term is refused.
        let mut pid = Vec::new();
        encode_pid(&mut pid, 1, 2);
        for n in 0..pid.len() {
            assert!(decode(&pid[..n]).is_err());
        }
    }
}
