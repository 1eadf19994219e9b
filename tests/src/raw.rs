//! The wire protocol by hand (PROTOCOL.md 2 and 4), independent of the
//! codec crate, for tests that send what no SDK would.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const HELLO: u8 = 0x01;
pub const SUBSCRIBE: u8 = 0x02;
pub const SEND_ASYNC: u8 = 0x10;
pub const SEND_SYNC: u8 = 0x11;
pub const RETURN: u8 = 0x20;
pub const FORWARD: u8 = 0x21;
pub const PING: u8 = 0x30;
pub const PONG: u8 = 0x31;
pub const GOODBYE: u8 = 0x32;
pub const WELCOME: u8 = 0x81;
pub const REQUEST: u8 = 0x82;
pub const RESPONSE: u8 = 0x83;
pub const REPLY: u8 = 0x84;
pub const TERMINATE: u8 = 0x86;
pub const ERROR: u8 = 0x87;

/// Field encoders, little-endian as the protocol says.
#[derive(Default, Clone)]
pub struct Body(pub Vec<u8>);

impl Body {
    pub fn new() -> Body {
        Body::default()
    }
    pub fn u8(mut self, v: u8) -> Body {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Body {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Body {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Body {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn raw(mut self, b: &[u8]) -> Body {
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(self, s: &str) -> Body {
        self.u16(s.len() as u16).raw(s.as_bytes())
    }
    pub fn bytes(self, b: &[u8]) -> Body {
        self.u32(b.len() as u32).raw(b)
    }
    /// The whole frame: length (type + body), type, body.
    pub fn frame(&self, ty: u8) -> Vec<u8> {
        let mut f = ((self.0.len() + 1) as u32).to_le_bytes().to_vec();
        f.push(ty);
        f.extend_from_slice(&self.0);
        f
    }
}

pub fn hello(version: u16, window: u32, token: &str, prefix: &str) -> Vec<u8> {
    Body::new().u16(version).u32(window).u32(0).str(token).str(prefix).frame(HELLO)
}

/// A trans_id stamped with (node, instance), PROTOCOL.md 2.2.
pub fn trans_id(node: u32, instance: u32) -> [u8; 16] {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut t = [0u8; 16];
    t[..8].copy_from_slice(&nanos.to_be_bytes());
    t[8..12].copy_from_slice(&node.to_be_bytes());
    t[12..].copy_from_slice(&instance.to_be_bytes());
    t
}

pub fn send(ty: u8, tid: &[u8; 16], timeout: u32, name: &str, body: &[u8]) -> Vec<u8> {
    Body::new().raw(tid).u32(timeout).u8(0).u8(0).str(name).bytes(b"").bytes(body).frame(ty)
}

pub fn ret(tid: &[u8; 16], status: u16, body: &[u8]) -> Vec<u8> {
    Body::new().raw(tid).u16(status).bytes(b"").bytes(body).frame(RETURN)
}

/// A bounds-checked reader over a frame body.
pub struct Cursor<'a>(pub &'a [u8]);

impl<'a> Cursor<'a> {
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        assert!(self.0.len() >= n, "frame too short");
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        h
    }
    pub fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take(2).try_into().unwrap())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    pub fn tid(&mut self) -> [u8; 16] {
        self.take(16).try_into().unwrap()
    }
    pub fn str(&mut self) -> String {
        let n = self.u16() as usize;
        String::from_utf8(self.take(n).to_vec()).expect("UTF-8")
    }
    pub fn bytes(&mut self) -> Vec<u8> {
        let n = self.u32() as usize;
        self.take(n).to_vec()
    }
}

#[derive(Debug)]
pub struct Welcome {
    pub node_id: u32,
    pub instance_id: u32,
    pub window: u32,
    pub max_frame: u32,
    pub keepalive: u32,
    pub prefix: String,
}

#[derive(Debug)]
pub struct Request {
    pub trans_id: [u8; 16],
    pub timeout: u32,
    pub priority: i8,
    pub name: String,
    pub body: Vec<u8>,
}

/// What happened when reading from the core.
#[derive(Debug, PartialEq, Eq)]
pub enum Got {
    Frame(u8, Vec<u8>),
    /// The core closed the connection (EOF, or a reset after it closed).
    Closed,
    /// Nothing within the wait.
    Nothing,
}

/// A raw connection to the core.
pub struct Raw {
    pub stream: UnixStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        Raw { stream: UnixStream::connect(socket).expect("connect to the core"), buf: Vec::new() }
    }

    pub fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the core");
    }

    /// Writes what may arrive after the core already refused the
    /// connection (and closed it): a failed write is not an error then.
    pub fn try_write(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// The next frame, or why there is none, within `wait`.
    pub fn read(&mut self, wait: Duration) -> Got {
        let deadline = Instant::now() + wait;
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_le_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if self.buf.len() >= 4 + len {
                    let f: Vec<u8> = self.buf.drain(..4 + len).collect();
                    return Got::Frame(f[4], f[5..].to_vec());
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Got::Nothing;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Got::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Got::Nothing,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Got::Closed,
                Err(e) => panic!("read from the core: {e}"),
            }
        }
    }

    /// The next frame, skipping PINGs; panics if none comes.
    pub fn frame(&mut self, wait: Duration) -> (u8, Vec<u8>) {
        loop {
            match self.read(wait) {
                Got::Frame(PING, _) => continue,
                Got::Frame(t, b) => return (t, b),
                other => panic!("expected a frame, got {other:?}"),
            }
        }
    }

    /// HELLO + WELCOME as an unmanaged instance.
    pub fn handshake(&mut self, window: u32, prefix: &str) -> Welcome {
        self.write(&hello(1, window, "", prefix));
        let (t, b) = self.frame(Duration::from_secs(10));
        assert_eq!(t, WELCOME, "expected WELCOME, got type {t:#x}: {b:?}");
        let mut c = Cursor(&b);
        let _version = c.u16();
        let node_id = c.u32();
        let instance_id = c.u32();
        let (_pi, _pc, _tc) = (c.u32(), c.u32(), c.u32());
        let window = c.u32();
        let max_frame = c.u32();
        let (_ta, _ts, _tt) = (c.u32(), c.u32(), c.u32());
        let _prio = c.u8();
        let keepalive = c.u32();
        let prefix = c.str();
        Welcome { node_id, instance_id, window, max_frame, keepalive, prefix }
    }

    /// SUBSCRIBE and its REPLY's status.
    pub fn subscribe(&mut self, req_id: u32, pattern: &str) -> u16 {
        self.write(&Body::new().u32(req_id).str(pattern).frame(SUBSCRIBE));
        let (t, b) = self.frame(Duration::from_secs(10));
        assert_eq!(t, REPLY);
        let mut c = Cursor(&b);
        assert_eq!(c.u32(), req_id);
        c.u16()
    }

    /// The ERROR frame the core sends before closing: (status, message).
    pub fn expect_error(&mut self, wait: Duration) -> (u16, String) {
        let (t, b) = self.frame(wait);
        assert_eq!(t, ERROR, "expected ERROR, got type {t:#x}");
        let mut c = Cursor(&b);
        (c.u16(), c.str())
    }

    /// Asserts the core closes the connection within `wait`.
    pub fn expect_closed(&mut self, wait: Duration) {
        loop {
            match self.read(wait) {
                Got::Closed => return,
                Got::Frame(PING, _) => continue,
                other => panic!("expected the core to close the connection, got {other:?}"),
            }
        }
    }
}

pub fn parse_request(b: &[u8]) -> Request {
    let mut c = Cursor(b);
    let trans_id = c.tid();
    let timeout = c.u32();
    let priority = c.u8() as i8;
    let _flags = c.u8();
    let _source = c.u64();
    let name = c.str();
    let _pattern = c.str();
    let _info = c.bytes();
    let body = c.bytes();
    Request { trans_id, timeout, priority, name, body }
}
