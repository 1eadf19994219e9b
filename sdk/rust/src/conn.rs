//! The framed connection: a blocking socket, a read buffer that frames are
//! decoded from in place, and a write buffer flushed in one call.

use crate::error::{Error, Result};
use crate::tls::{TlsFiles, TlsStream};
use cumulo_proto::{next_frame_len, DecodeError};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    /// Connects to `CUMULO_SOCKET`-style addresses: a path or
    /// `tcp://host:port`; over TCP with TLS when `tls.ca` is set.
    pub fn connect(addr: &str, tls: &TlsFiles) -> Result<Stream> {
        let Some(hostport) = addr.strip_prefix("tcp://") else {
            return Ok(Stream::Unix(UnixStream::connect(addr)?));
        };
        let s = TcpStream::connect(hostport)?;
        s.set_nodelay(true)?;
        match &tls.ca {
            None => Ok(Stream::Tcp(s)),
            Some(ca) => {
                let host = hostport.rsplit_once(':').map_or(hostport, |(host, _port)| host);
                Ok(Stream::Tls(Box::new(crate::tls::connect(tls, ca, host, s)?)))
            }
        }
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    fn set_write_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_write_timeout(t),
            Stream::Tcp(s) => s.set_write_timeout(t),
            Stream::Tls(s) => s.sock.set_write_timeout(t),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
            // rustls buffers the record: write it out now, as a socket
            // write would have.
            Stream::Tls(s) => {
                let n = s.write(buf)?;
                s.flush()?;
                Ok(n)
            }
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const READ_CHUNK: usize = 64 * 1024;

pub struct Conn {
    stream: Stream,
    /// Unparsed bytes are `rbuf[rstart..rend]`; the rest of `rbuf` is room
    /// to read into (kept initialised, so reads need no zeroing).
    pub rbuf: Vec<u8>,
    pub rstart: usize,
    pub rend: usize,
    pub wbuf: Vec<u8>,
    pub max_frame: u32,
    timeout: Option<Duration>,
}

impl Conn {
    pub fn new(stream: Stream) -> Conn {
        Conn {
            stream,
            rbuf: vec![0; READ_CHUNK],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(READ_CHUNK),
            max_frame: cumulo_proto::DEFAULT_MAX_FRAME,
            timeout: None,
        }
    }

    pub fn flush(&mut self) -> Result<()> {
        if !self.wbuf.is_empty() {
            self.stream.write_all(&self.wbuf)?;
            self.wbuf.clear();
        }
        Ok(())
    }

    /// Bounds how long a write may block (None: as long as it takes).
    pub fn set_write_timeout(&mut self, t: Option<Duration>) -> Result<()> {
        Ok(self.stream.set_write_timeout(t)?)
    }

    /// The byte range of the next whole frame (type byte and body) in
    /// `rbuf`, if one is already buffered.
    pub fn buffered_frame(&self) -> Result<Option<(usize, usize)>> {
        let data = &self.rbuf[self.rstart..self.rend];
        match next_frame_len(data, self.max_frame) {
            Ok(Some(total)) => Ok(Some((self.rstart + 4, self.rstart + total))),
            Ok(None) => Ok(None),
            Err(e @ DecodeError::TooLarge { .. }) => Err(Error::Protocol(e.to_string())),
            Err(e) => Err(Error::Protocol(e.to_string())),
        }
    }

    /// Moves unparsed bytes to the front and makes sure a whole frame (or
    /// another chunk) fits after them.
    fn make_room(&mut self) {
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        let pending = &self.rbuf[..self.rend];
        let frame =
            if pending.len() >= 4 { 4 + u32::from_le_bytes(pending[..4].try_into().unwrap()) as usize } else { 0 };
        let need = (self.rend + READ_CHUNK).max(frame);
        if self.rbuf.len() < need {
            self.rbuf.resize(need, 0);
        }
    }

    /// Waits for the next whole frame, flushing pending writes first.
    /// `Ok(None)` when `wait` elapses first.
    pub fn next_frame(&mut self, wait: Option<Duration>) -> Result<Option<(usize, usize)>> {
        loop {
            if let Some(r) = self.buffered_frame()? {
                return Ok(Some(r));
            }
            self.flush()?;
            self.make_room();
            if wait != self.timeout {
                self.stream.set_read_timeout(wait)?;
                self.timeout = wait;
            }
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    return Err(Error::Io(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the core closed the connection",
                    )));
                }
                Ok(n) => self.rend += n,
                // A read with a timeout fails with EINTR on a handled signal
                // even under SA_RESTART, and when the process is stopped and
                // continued (signal(7)): read again.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Ok(None);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}
