//! Reading a server's frames back, for the tests and the fuzz target: the
//! gateway writes through tungstenite, so this only checks its output.

/// Parses what a server wrote: unmasked frames, lengths that fit.
pub fn server_frames(mut b: &[u8]) -> Result<Vec<(u8, Vec<u8>)>, String> {
    let mut v = Vec::new();
    while !b.is_empty() {
        if b.len() < 2 {
            return Err(format!("a partial frame header {b:?}"));
        }
        if b[1] & 0x80 != 0 {
            return Err("a server frame must not be masked".into());
        }
        let (len, at) = match b[1] & 0x7f {
            126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
            127 if b.len() >= 10 => (u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize, 10),
            n if n < 126 => (n as usize, 2),
            _ => return Err("a partial length".into()),
        };
        if b.len() < at + len {
            return Err(format!("a frame of {len} bytes with {} left", b.len() - at));
        }
        v.push((b[0] & 0x0f, b[at..at + len].to_vec()));
        b = &b[at + len..];
    }
    Ok(v)
}
