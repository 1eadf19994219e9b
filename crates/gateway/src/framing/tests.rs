use super::*;

const LIMITS: Limits = Limits { max_body: 1000, max_header_size: 4096, max_headers: 10 };

/// Feeds `input` in pieces of `step` bytes: the refusal (if any) and the
/// offset in `input` up to which hyper may read.
fn run(input: &[u8], step: usize) -> (Option<Refusal>, usize) {
    let mut f = Framing::new(LIMITS);
    let mut at = 0;
    for piece in input.chunks(step) {
        let keep = f.feed(piece);
        at += keep;
        if keep < piece.len() {
            break;
        }
    }
    (f.refused(), at)
}

/// The same verdict however the input is split.
fn verdict(input: &[u8]) -> (Option<Refusal>, usize) {
    let whole = run(input, input.len().max(1));
    for step in 1..input.len().min(64) {
        assert_eq!(run(input, step), whole, "split every {step} bytes: {:?}", String::from_utf8_lossy(input));
    }
    whole
}

#[test]
fn requests_within_the_limits_pass_whole() {
    let cases: &[&[u8]] = &[
        b"GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n",
        b"\r\n\r\nGET /a HTTP/1.1\nHost: t\n\n",
        b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\n\r\n\r\n\nGET /b HTTP/1.1\r\n\r\n",
        b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n",
        b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
        b"POST /a HTTP/1.1\r\nContent-Length: 18446744073709551613\r\n\r\nabc",
        // 1000 bytes of chunks, then a second body starts from zero
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1f4\r\n",
    ];
    for input in cases {
        assert_eq!(verdict(input), (None, input.len()), "{:?}", String::from_utf8_lossy(input));
    }
    let mut two = b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n".to_vec();
    two.extend(vec![b'x'; 1000]);
    two.extend(b"\r\n0\r\n\r\nPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n");
    assert_eq!(verdict(&two), (None, two.len()), "each body counts on its own");
}

#[test]
fn content_lengths_hyper_calls_too_large_are_refused() {
    for n in ["18446744073709551614", "18446744073709551615", "0018446744073709551615"] {
        let input = format!("POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n\r\n");
        assert_eq!(verdict(input.as_bytes()), (Some(Refusal::ContentLength), input.len()), "{n}");
    }
    // hyper refuses these itself with 400: not followed
    for n in ["18446744073709551616", "1, 1", "-1", "5\r\nContent-Length: 6"] {
        let input = format!("POST /a HTTP/1.1\r\nContent-Length: {n}\r\n\r\nffffffffff\r\n");
        assert_eq!(verdict(input.as_bytes()), (None, input.len()), "{n}");
    }
}

#[test]
fn chunk_sizes_over_max_body_are_refused_at_the_end_of_their_line() {
    let head = b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for (chunks, refused_line) in [
        (&b"ffffffffffffffff\r\n"[..], &b"ffffffffffffffff\r"[..]),
        (b"3e9\r\n", b"3e9\r"),
        (b"3E9;name=value\r\n", b"3E9;name=value\r"),
        (b"1f4\r\n", b""), // 500: within
    ] {
        let mut input = head.clone();
        input.extend(chunks);
        let want = if refused_line.is_empty() {
            (None, input.len())
        } else {
            (Some(Refusal::ChunkSize), head.len() + refused_line.len())
        };
        assert_eq!(verdict(&input), want, "{:?}", String::from_utf8_lossy(chunks));
    }
    // the sum counts: 500 + 501
    let mut input = head.clone();
    input.extend(b"1f4\r\n");
    input.extend(vec![b'x'; 500]);
    input.extend(b"\r\n1f5\r\n");
    assert_eq!(verdict(&input), (Some(Refusal::ChunkSize), input.len() - 1));
}

#[test]
fn what_it_does_not_follow_it_leaves_to_hyper() {
    let cases: &[&[u8]] = &[
        b"GET /a HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nffffffffffffffff\r\n",
        b"CONNECT a:1 HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
        b"POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nffffffffffffffff\r\n",
        b"NOT HTTP\r\n\r\nPOST /a HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
        b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
    ];
    for input in cases {
        assert_eq!(verdict(input), (None, input.len()), "{:?}", String::from_utf8_lossy(input));
    }
    let many: String = (0..11).map(|i| format!("X-{i}: 1\r\n")).collect();
    let input = format!("POST /a HTTP/1.1\r\n{many}Content-Length: 18446744073709551615\r\n\r\n");
    assert_eq!(verdict(input.as_bytes()), (None, input.len()), "over max_headers: hyper answers 431 itself");
    let big = format!(
        "GET /a HTTP/1.1\r\nX: {}\r\n\r\nPOST /a HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
        "y".repeat(5000)
    );
    assert_eq!(verdict(big.as_bytes()), (None, big.len()), "over max_header_size");
}

#[test]
fn an_oversized_chunk_is_found_in_a_body_error() {
    let io = io::Error::new(io::ErrorKind::InvalidData, OversizedChunk);
    assert!(is_oversized_chunk(&io));
    let other = io::Error::new(io::ErrorKind::InvalidData, "invalid chunk size: overflow");
    assert!(!is_oversized_chunk(&other));
}
