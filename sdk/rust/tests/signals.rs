//! A signal that interrupts a blocking read of the SDK (EINTR) does not fail
//! the call: the read is retried. On Linux a read with a timeout, which is
//! what a waiting send_sync does, fails with EINTR when the process is
//! stopped and continued (SIGSTOP, SIGCONT: signal(7)), with no handler
//! installed; it does so for any handled signal too.

use cumulo::{Api, Options, SendOptions};
use cumulo_proto::{decode, kind, next_frame_len, Frame, Return, Welcome, LEN_PREFIX};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

/// Reads the next whole frame (type byte and body) from the instance.
fn read_frame(s: &mut UnixStream, buf: &mut Vec<u8>) -> Vec<u8> {
    loop {
        if let Some(total) = next_frame_len(buf, u32::MAX).unwrap() {
            let frame = buf[LEN_PREFIX..total].to_vec();
            buf.drain(..total);
            return frame;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "the instance closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn being_stopped_and_continued_during_send_sync_does_not_fail_it() {
    let dir = std::env::temp_dir().join(format!("cumulo-rs-eintr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("core.sock");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let core = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        assert_eq!(read_frame(&mut s, &mut buf)[0], kind::HELLO);
        let w = Welcome {
            version: 1,
            node_id: 1,
            instance_id: 2,
            process_index: 0,
            process_count: 1,
            thread_count: 1,
            window: 1,
            max_frame: 1 << 20,
            timeout_async: 5000,
            timeout_sync: 5000,
            timeout_terminate: 1000,
            priority_default: 0,
            keepalive: 5000,
            prefix: "/eintr/",
        };
        let mut out = Vec::new();
        cumulo_proto::encode_welcome(&mut out, &w);
        s.write_all(&out).unwrap();
        let f = read_frame(&mut s, &mut buf);
        let Ok(Frame::SendSync(send)) = decode(&f) else { panic!("expected SEND_SYNC") };
        // The caller now waits in a read with a timeout: stop and continue
        // this process, from outside it, a few times.
        let me = std::process::id();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(40));
            let stop_and_continue = format!("kill -STOP {me}; sleep 0.05; kill -CONT {me}");
            let status = std::process::Command::new("sh").args(["-c", &stop_and_continue]).status().unwrap();
            assert!(status.success());
        }
        std::thread::sleep(Duration::from_millis(40));
        let r = Return { trans_id: send.trans_id, status: 0, response_info: b"", response: b"answered" };
        let mut out = Vec::new();
        cumulo_proto::encode_return(&mut out, kind::RESPONSE, &r);
        s.write_all(&out).unwrap();
        assert_eq!(decode(&read_frame(&mut s, &mut buf)).unwrap(), Frame::Goodbye);
    });
    let mut api = Api::connect(Options::unmanaged(path.display().to_string(), "/eintr/")).unwrap();
    let r = api.send_sync("/somewhere", b"", b"", SendOptions::default());
    assert_eq!(r.unwrap().body, b"answered");
    drop(api);
    core.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
