use super::*;

/// Feeds `input` in pieces of `step` bytes (the last one shorter), and
/// collects what comes out until the end or the first refusal.
fn feed(framing: Framing, max: usize, input: &[u8], step: usize) -> (Vec<Vec<u8>>, Option<BridgeError>) {
    let mut d = framing.decoder(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(step) {
        buf.extend_from_slice(piece);
        loop {
            match d.next(&mut buf) {
                Ok(Some(m)) => out.push(m.to_vec()),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    loop {
        match d.finish(&mut buf) {
            Ok(Some(m)) => out.push(m.to_vec()),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// The same outcome whatever the input is split at.
fn every_split(framing: Framing, max: usize, input: &[u8]) -> (Vec<Vec<u8>>, Option<BridgeError>) {
    let whole = feed(framing, max, input, input.len().max(1));
    for step in 1..=input.len().max(1) {
        assert_eq!(feed(framing, max, input, step), whole, "split every {step} bytes of {input:?}");
    }
    whole
}

fn v(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn framed(bodies: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in bodies {
        Framing::Length.encode(b, &mut out);
    }
    out
}

#[test]
fn lines_end_at_newline_and_a_cr_before_it_is_dropped() {
    let (got, err) = every_split(Framing::Line, 16, b"one\ntwo\r\n\nthree\r\r\n");
    assert_eq!(got, v(&["one", "two", "", "three\r"]));
    assert_eq!(err, None);
}

#[test]
fn a_last_line_without_newline_is_a_message_at_the_close() {
    assert_eq!(every_split(Framing::Line, 16, b"a\nlast"), (v(&["a", "last"]), None));
    assert_eq!(every_split(Framing::Line, 16, b"a\nlast\r"), (v(&["a", "last"]), None));
}

#[test]
fn a_line_of_max_message_bytes_passes_and_one_more_is_refused() {
    let max = 8;
    assert_eq!(every_split(Framing::Line, max, b"12345678\r\n"), (v(&["12345678"]), None));
    assert_eq!(every_split(Framing::Line, max, b"12345678\n"), (v(&["12345678"]), None));
    let (got, err) = every_split(Framing::Line, max, b"ok\n123456789\nafter\n");
    assert_eq!((got, err), (v(&["ok"]), Some(BridgeError::TooLong { max })));
    // Refused before its end arrives: the buffer stays bounded.
    let mut d = Framing::Line.decoder(max);
    let mut buf = BytesMut::from(&b"123456789"[..]);
    assert_eq!(d.next(&mut buf), Err(BridgeError::TooLong { max }));
}

#[test]
fn length_prefixed_messages_round_trip_whatever_the_split() {
    let bodies: [&[u8]; 3] = [b"hello", b"\n\0binary\r\n", b"x"];
    let (got, err) = every_split(Framing::Length, 64, &framed(&bodies));
    assert_eq!(got, bodies.iter().map(|b| b.to_vec()).collect::<Vec<_>>());
    assert_eq!(err, None);
}

#[test]
fn a_zero_or_oversized_length_prefix_is_refused() {
    let mut zero = framed(&[b"ok"]);
    zero.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(every_split(Framing::Length, 64, &zero), (v(&["ok"]), Some(BridgeError::ZeroLength)));
    let at_max = framed(&[&[7u8; 64]]);
    assert_eq!(every_split(Framing::Length, 64, &at_max).1, None);
    // Refused from the prefix alone, before any of the body.
    let over = 65u32.to_be_bytes();
    assert_eq!(every_split(Framing::Length, 64, &over), (vec![], Some(BridgeError::TooLong { max: 64 })));
    let huge = u32::MAX.to_be_bytes();
    assert_eq!(every_split(Framing::Length, 64, &huge).1, Some(BridgeError::TooLong { max: 64 }));
}

#[test]
fn a_close_inside_a_length_prefixed_message_is_truncated() {
    let mut input = framed(&[b"whole"]);
    input.extend_from_slice(&framed(&[b"cut short"])[..7]);
    assert_eq!(every_split(Framing::Length, 64, &input), (v(&["whole"]), Some(BridgeError::Truncated)));
    assert_eq!(every_split(Framing::Length, 64, &[0, 0]).1, Some(BridgeError::Truncated));
}

#[test]
fn answers_are_framed_as_the_messages_were() {
    let mut out = Vec::new();
    Framing::Line.encode(b"pong", &mut out);
    Framing::Line.encode(b"", &mut out);
    assert_eq!(out, b"pong\n\n");
    let mut out = Vec::new();
    Framing::Length.encode(b"pong", &mut out);
    Framing::Length.encode(b"", &mut out);
    assert_eq!(out, b"\0\0\0\x04pong\0\0\0\0");
}
