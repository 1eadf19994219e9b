//! The core's side of the protocol, played by a test thread over a real
//! Unix socket: it accepts one instance, answers HELLO with a WELCOME, then
//! runs the test's script (read this frame, write that one).

use crate::{Api, Options};
use cumulo_proto::{decode, kind, next_frame_len, Frame, TransId, Welcome, LEN_PREFIX};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the fake core waits for the SDK before failing the test.
const IO_WAIT: Duration = Duration::from_secs(5);

/// What the fake core says in WELCOME (PROTOCOL.md 4.2); distinct values so
/// that a field read from the wrong place shows.
#[derive(Clone, Debug)]
pub struct Said {
    pub node_id: u32,
    pub instance_id: u32,
    pub process_index: u32,
    pub process_count: u32,
    pub thread_count: u32,
    pub window: u32,
    pub max_frame: u32,
    pub timeout_async: u32,
    pub timeout_sync: u32,
    pub timeout_terminate: u32,
    pub priority_default: i8,
    pub keepalive: u32,
    pub prefix: String,
    /// Answer HELLO with this ERROR (status, message) instead of WELCOME.
    pub refuse: Option<(u16, &'static str)>,
}

impl Default for Said {
    fn default() -> Said {
        Said {
            node_id: 7,
            instance_id: 3,
            process_index: 1,
            process_count: 2,
            thread_count: 4,
            window: 1,
            max_frame: 1 << 20,
            timeout_async: 5001,
            timeout_sync: 6002,
            timeout_terminate: 7003,
            priority_default: 0,
            keepalive: 1504,
            prefix: "/fake/".into(),
            refuse: None,
        }
    }
}

/// A HELLO as the fake core received it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GotHello {
    pub version: u16,
    pub window: u32,
    pub thread_index: u32,
    pub token: String,
    pub prefix: String,
}

/// The core's end of one instance connection.
pub struct Peer {
    stream: UnixStream,
    buf: Vec<u8>,
    pub hello: GotHello,
}

impl Peer {
    /// The next whole frame from the instance (type byte and body).
    pub fn frame(&mut self) -> Vec<u8> {
        self.try_frame().expect("the instance closed the connection")
    }

    /// The next frame, or None at end of stream.
    pub fn try_frame(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(total) = next_frame_len(&self.buf, u32::MAX).unwrap() {
                let frame = self.buf[LEN_PREFIX..total].to_vec();
                self.buf.drain(..total);
                return Some(frame);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).expect("the fake core waited too long for the instance");
            if n == 0 {
                assert!(self.buf.is_empty(), "the instance closed in the middle of a frame");
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next frame, which must be of type `ty`.
    pub fn expect(&mut self, ty: u8) -> Vec<u8> {
        let f = self.frame();
        assert_eq!(f[0], ty, "expected frame type {ty:#04x}, got {:?}", decode(&f));
        f
    }

    /// The next frame must be GOODBYE, then the connection must end.
    pub fn expect_goodbye_and_close(&mut self) {
        let f = self.frame();
        assert_eq!(decode(&f).unwrap(), Frame::Goodbye);
        assert!(self.try_frame().is_none(), "a frame after GOODBYE");
    }

    /// Writes whatever `encode` appends (one or more frames) in one write.
    pub fn write(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        let mut out = Vec::new();
        encode(&mut out);
        self.stream.write_all(&out).unwrap();
    }

    /// Answers SUBSCRIBE/UNSUBSCRIBE/SUBSCRIBE_COUNT with REPLY `value`.
    pub fn reply_to_control(&mut self, ty: u8, value: u32) -> String {
        let f = self.expect(ty);
        let Ok(Frame::Subscribe(c) | Frame::Unsubscribe(c) | Frame::SubscribeCount(c)) = decode(&f) else {
            panic!("not a control frame")
        };
        let pattern = c.pattern.to_string();
        let reply = cumulo_proto::Reply { req_id: c.req_id, status: 0, value, message: "" };
        self.write(|b| cumulo_proto::encode_reply(b, &reply));
        pattern
    }

    /// Sends a REQUEST for `pattern` and returns the instance's answer frame.
    pub fn request(&mut self, tid: TransId, pattern: &str, body: &[u8]) -> Vec<u8> {
        let r = request(tid, pattern, body);
        self.write(|b| cumulo_proto::encode_request(b, &r));
        self.frame()
    }
}

/// A REQUEST from source 0x0000000900000002 with a timeout of 5 s.
pub fn request<'a>(tid: TransId, pattern: &'a str, body: &'a [u8]) -> cumulo_proto::Request<'a> {
    cumulo_proto::Request {
        trans_id: tid,
        timeout: 5000,
        priority: 2,
        flags: cumulo_proto::REQUEST_SYNC,
        source: (9 << 32) | 2,
        name: pattern,
        pattern,
        request_info: b"",
        request: body,
    }
}

/// A trans_id of the (fake) sender, instance 2 of node 9.
pub fn tid(n: u64) -> TransId {
    TransId::new(n, 9, 2)
}

/// The status, response_info and response of a RETURN (or RESPONSE).
pub fn returned(f: &[u8]) -> (u16, Vec<u8>, Vec<u8>) {
    match decode(f).unwrap() {
        Frame::Return(r) | Frame::Response(r) => (r.status, r.response_info.to_vec(), r.response.to_vec()),
        other => panic!("expected RETURN, got {other:?}"),
    }
}

/// A fake core serving one instance on a fresh socket.
pub struct FakeCore {
    dir: PathBuf,
    pub socket: String,
    thread: Option<JoinHandle<()>>,
}

impl FakeCore {
    /// Listens, and in a thread of its own accepts one instance, answers its
    /// HELLO with `said` (the window as asked if `said.window` is 0), then
    /// runs `script`.
    pub fn start(said: Said, script: impl FnOnce(&mut Peer) + Send + 'static) -> FakeCore {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // Short: a Unix socket path must fit in 108 bytes.
        let dir = std::env::temp_dir().join(format!(
            "cumulo-rs-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("core.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let thread = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(IO_WAIT)).unwrap();
            stream.set_write_timeout(Some(IO_WAIT)).unwrap();
            let mut peer = Peer { stream, buf: Vec::new(), hello: GotHello::default() };
            let f = peer.expect(kind::HELLO);
            let Ok(Frame::Hello(h)) = decode(&f) else { panic!("not a HELLO") };
            peer.hello = GotHello {
                version: h.version,
                window: h.window,
                thread_index: h.thread_index,
                token: h.token.into(),
                prefix: h.prefix.into(),
            };
            if let Some((status, message)) = said.refuse {
                peer.write(|b| cumulo_proto::encode_error(b, status, message));
                return;
            }
            let window = if said.window == 0 { h.window } else { said.window };
            let w = Welcome {
                version: 1,
                node_id: said.node_id,
                instance_id: said.instance_id,
                process_index: said.process_index,
                process_count: said.process_count,
                thread_count: said.thread_count,
                window,
                max_frame: said.max_frame,
                timeout_async: said.timeout_async,
                timeout_sync: said.timeout_sync,
                timeout_terminate: said.timeout_terminate,
                priority_default: said.priority_default,
                keepalive: said.keepalive,
                prefix: &said.prefix,
            };
            peer.write(|b| cumulo_proto::encode_welcome(b, &w));
            script(&mut peer);
        });
        FakeCore { socket: path.display().to_string(), dir, thread: Some(thread) }
    }

    /// Starts a fake core with the default WELCOME and connects an instance to it.
    pub fn with_api(script: impl FnOnce(&mut Peer) + Send + 'static) -> (FakeCore, Api) {
        FakeCore::with_api_said(Said::default(), script)
    }

    pub fn with_api_said(said: Said, script: impl FnOnce(&mut Peer) + Send + 'static) -> (FakeCore, Api) {
        let core = FakeCore::start(said, script);
        let api = Api::connect(Options::unmanaged(core.socket.clone(), "/fake/")).expect("connect to the fake core");
        (core, api)
    }

    /// Waits for the script to finish; its panic (a failed check) fails the test.
    pub fn join(mut self) {
        if let Some(t) = self.thread.take() {
            if let Err(panic) = t.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

impl Drop for FakeCore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
