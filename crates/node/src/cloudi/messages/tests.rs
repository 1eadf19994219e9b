//! Messages as CloudI's APIs really write them (bytes produced by erlang_py
//! 2.0.7's term_to_binary, the encoder of PyPI's `cloudi` 2.0.7).

use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn decodes_erlang_py_terms() {
    let b = hex("836806730973656e645f73796e636b0003612f626d000000046b0076006d0000000372657162000013886100");
    let ApiMessage::SendSync(s) = decode(&b).unwrap() else { panic!("not send_sync") };
    assert_eq!(
        s,
        ApiSend { name: Cow::Borrowed(b"a/b"), request_info: b"k\0v\0", request: b"req", timeout: 5000, priority: 0 }
    );

    let b = hex("836804730a726563765f6173796e636e0400ffffffff6d0000001000000000000000000000000000000000770474727565");
    assert_eq!(
        decode(&b).unwrap(),
        ApiMessage::RecvAsync { timeout: u32::MAX, trans_id: NULL_TRANS_ID, consume: true }
    );

    assert_eq!(decode(&hex("836802730873687574646f776e6a")).unwrap(), ApiMessage::Shutdown(Cow::Borrowed(b"")));
    assert_eq!(decode(&hex("837307706f6c6c696e67")).unwrap(), ApiMessage::Polling);
}

#[test]
fn refuses_wrong_shapes_with_a_reason() {
    // {send_sync, "a/b"}: too few elements.
    let e = decode(&hex("836802730973656e645f73796e636b0003612f62")).unwrap_err();
    assert!(e.contains("send_sync"), "{e}");
    // {subscribe, 42}: the pattern is not a string.
    let e = decode(&hex("83680273097375627363726962656103")).unwrap_err();
    assert!(e.contains("not a string"), "{e}");
    // a bare atom nobody sends
    assert!(decode(&hex("8373036162")).is_err());
    // not a term at all
    assert!(decode(b"garbage").is_err());
    // recv_async with a 3-byte trans_id
    let e = decode(&hex("836804730a726563765f6173796e6361016d00000003000000770474727565")).unwrap_err();
    assert!(e.contains("trans_id"), "{e}");
}

#[test]
fn encodes_the_layouts_the_apis_parse() {
    let mut out = Vec::new();
    encode_return_async(&mut out, &TransId([7; 16]));
    assert_eq!(&out[..4], &20u32.to_be_bytes());
    assert_eq!(&out[4..8], &RETURN_ASYNC.to_ne_bytes());
    assert_eq!(&out[8..], &[7; 16]);

    out.clear();
    encode_response(&mut out, RETURN_SYNC, b"i", b"", &TransId([1; 16]));
    let mut want = 6u32.to_ne_bytes().to_vec();
    want.extend_from_slice(&1u32.to_ne_bytes());
    want.extend_from_slice(b"i\0");
    want.extend_from_slice(&0u32.to_ne_bytes());
    want.push(0);
    want.extend_from_slice(&[1; 16]);
    assert_eq!(&out[4..], &want[..]);
    assert_eq!(u32::from_be_bytes(out[..4].try_into().unwrap()) as usize, want.len());

    out.clear();
    let tid = TransId([9; 16]);
    encode_request(
        &mut out,
        &Request {
            sync: true,
            name: "/p/a",
            pattern: "/p/*",
            request_info: b"",
            request: b"x",
            timeout: 1000,
            priority: -1,
            trans_id: &tid,
            source: (1 << 32) | 5,
        },
    );
    let body = &out[4..];
    assert_eq!(&body[0..4], &SEND_SYNC.to_ne_bytes());
    assert_eq!(&body[4..8], &5u32.to_ne_bytes());
    assert_eq!(&body[8..13], b"/p/a\0");
    // the source is a pid term the APIs can decode
    let mut pid = Vec::new();
    etf::encode_pid(&mut pid, 1, 5);
    let pid_at = body.len() - pid.len();
    assert_eq!(&body[pid_at - 4..pid_at], &(pid.len() as u32).to_ne_bytes());
    assert_eq!(&body[pid_at - 4 - 16 - 1..pid_at - 4 - 16], &[(-1i8) as u8]);
    assert!(matches!(etf::decode(&body[pid_at..]).unwrap(), etf::Term::Pid(_)));
}
