//! The gateway (crate cumulo-gateway) in front of a real core, over
//! in-memory streams.
//!
//! A WebSocket session over an in-memory stream, through the real gateway
//! connection code (hyper, the upgrade, tokio-tungstenite), in front of a
//! core with `echo` under `/echo/`: the bytes a browser would send, and the
//! frames the gateway writes back.

use crate::fuzzing;
use cumulo_gateway::fuzzing::server_frames;

const UPGRADE: &[u8] = b"GET /ws/a HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
const SETTINGS: &str = "[[websocket]]\npath = \"/ws/\"\nrequest_name = \"/echo/in\"\nmax_message = 64\n\
max_frame = 64\nidle_timeout_ms = 200\nping_ms = 0";

/// A masked client frame (mask 0, so the payload is as given).
fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    if payload.len() < 126 {
        f.push(0x80 | payload.len() as u8);
    } else {
        f.push(0x80 | 126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Runs a session: the upgrade then `frames`; the HTTP head of the answer
/// and the server frames (opcode, payload) after it.
fn session(frames: &[u8]) -> (String, Vec<(u8, Vec<u8>)>) {
    let settings: toml::Table = SETTINGS.parse().unwrap();
    let input = [UPGRADE, frames].concat();
    let out = fuzzing::run(async {
        let core = fuzzing::start_core(fuzzing::small_limits()).await;
        fuzzing::http_session(&core, &settings, &input, 64).await.expect("the gateway ends the connection")
    });
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP head") + 4;
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    (head, server_frames(&out[end..]).expect("well-formed server frames"))
}

fn close_code(frames: &[(u8, Vec<u8>)]) -> Option<u16> {
    frames.iter().find(|(op, _)| *op == 8).map(|(_, p)| u16::from_be_bytes([p[0], p[1]]))
}

#[test]
fn upgrade_then_echo_through_a_service_then_idle_close() {
    let (head, frames) = session(&client_frame(1, b"hello"));
    assert!(head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{head}");
    // RFC 6455 1.3's example key and its accept value
    assert!(head.to_ascii_lowercase().contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n"), "{head}");
    assert_eq!(frames[0], (1, b"hello".to_vec()));
    assert_eq!(close_code(&frames), Some(1001)); // idle
}

#[test]
fn binary_stays_binary() {
    let (_, frames) = session(&client_frame(2, b"\xff\x00"));
    assert_eq!(frames[0], (2, b"\xff\x00".to_vec()));
}

#[test]
fn oversize_is_1009_and_bad_frames_are_1002() {
    let (_, frames) = session(&client_frame(1, &[b'x'; 65]));
    assert_eq!(close_code(&frames), Some(1009));
    let (_, frames) = session(b"\x81\x05hello"); // unmasked
    assert_eq!(close_code(&frames), Some(1002));
    let (_, frames) = session(&client_frame(3, b"")); // a reserved opcode
    assert_eq!(close_code(&frames), Some(1002));
    let (_, frames) = session(&client_frame(1, b"\xff\xfe")); // not UTF-8
    assert_eq!(close_code(&frames), Some(1007));
}

#[test]
fn a_client_close_is_answered() {
    let (_, frames) = session(&client_frame(8, &1000u16.to_be_bytes()));
    assert_eq!(close_code(&frames), Some(1000));
}

mod framing {
    use crate::fuzzing;

    /// The whole gateway (hyper, the watch, the gateway) over an in-memory
    /// connection, the client writing `input` in pieces of `step` bytes and
    /// never closing: what it got, and after how long (paused clock).
    fn session(input: &[u8], step: usize) -> (String, std::time::Duration) {
        let settings: toml::Table = "max_body = 4096\nbody_timeout_ms = 30000".parse().unwrap();
        fuzzing::run(async {
            let core = fuzzing::start_core(fuzzing::small_limits()).await;
            let started = tokio::time::Instant::now();
            let out =
                fuzzing::http_session(&core, &settings, input, step).await.expect("the gateway ends the connection");
            (String::from_utf8_lossy(&out).into_owned(), started.elapsed())
        })
    }

    #[test]
    fn through_hyper_oversized_chunks_and_lengths_are_413_at_once_however_split() {
        let chunk =
            b"POST /echo/x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n4\r\nabcd\r\nffffffffffffffff\r\n";
        let length = b"POST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 18446744073709551615\r\n\r\n";
        let pipelined = b"GET /echo/a?x=1 HTTP/1.1\r\nhost: t\r\n\r\nPOST /echo/x HTTP/1.1\r\nhost: t\r\ncontent-length: 18446744073709551614\r\n\r\n";
        for step in [1, 2, 7, 64, 1000] {
            for input in [&chunk[..], &length[..]] {
                let (out, took) = session(input, step);
                assert!(out.starts_with("HTTP/1.1 413 Payload Too Large\r\n"), "split {step}: {out}");
                assert!(out.contains("max_body (4096 bytes)") && out.contains("connection: close"), "{out}");
                assert!(took < std::time::Duration::from_secs(1), "split {step}: answered after {took:?}");
            }
            let (out, _) = session(pipelined, step);
            let first = out.find("HTTP/1.1 200 OK").expect("the first request is answered");
            assert!(out[first..].contains("HTTP/1.1 413 Payload Too Large\r\n"), "split {step}: {out}");
            assert!(!out.contains(" 431 "), "{out}");
        }
        // a chunked body within max_body is served
        let fine = b"POST /echo/x HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n4\r\nabcd\r\n0\r\n\r\n";
        let (out, _) = session(fine, 3);
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n") && out.ends_with("abcd"), "{out}");
    }
}
