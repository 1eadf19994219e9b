//! The external-service listener: accepts instance connections (Unix socket,
//! optionally TCP), runs the handshake, then one reader and one writer task
//! per connection. The reader decodes frames in place from its buffer and
//! hands each to the routing code; the writer flushes the connection's outbox.

use crate::shards::handoff::{Adoption, Order, StdSocket};
use cumulo_config::ServiceOptions;
use cumulo_proto::{decode, next_frame_len, DecodeError, Frame, Status, LEN_PREFIX};
use cumulo_router::CloseReason;
use cumulo_router::InstanceId;
use cumulo_router::{Accepted, Shared, HUNG_AFTER_ROUNDS};
use cumulo_router::{Endpoint, Outbox, Via};
use cumulo_sys::Throttle;
use cumulo_tls::Tls;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// Bytes read per system call at most; also the initial buffer size.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// The largest HELLO there can be, bytes after the length prefix: type
/// (1), version (2), window (4), thread_index (4), and two `str` fields of
/// at most 2 + 65535 bytes each (PROTOCOL.md 4.1). A longer first frame is
/// refused before its body is read: until HELLO nobody knows the peer, and
/// it may not make the core buffer max_frame bytes.
pub const MAX_HELLO_FRAME: u32 = 1 + 2 + 4 + 4 + 2 * (2 + u16::MAX as u32);
/// How long buffered frames (an ERROR, say) may take to leave once the core
/// has closed a connection, before the connection is dropped regardless.
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Binds the Unix socket: its folder is created private to the user, a stale
/// socket file is replaced, and the socket itself is user-only (0600).
///
/// It is bound under a temporary name and renamed into place once it
/// listens and is user-only: a client that waits for the path to appear can
/// connect at once (between bind and listen a connect is refused), and the
/// socket is never there with the umask's permissions.
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by a running core", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let temporary = path.with_file_name(format!(".cumulo-{}.sock", std::process::id()));
    // A Unix socket's path is at most 107 bytes: where the temporary name
    // would not fit, the socket is bound in place as before.
    let at = match temporary.as_os_str().len() <= MAX_SOCKET_PATH {
        true => temporary.as_path(),
        false => path,
    };
    let _ = std::fs::remove_file(at);
    let l = UnixListener::bind(at)?;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o600))?;
    if at != path {
        if let Err(e) = std::fs::rename(at, path) {
            let _ = std::fs::remove_file(at);
            return Err(e);
        }
    }
    Ok(l)
}

/// The longest path a Unix socket can be bound to (sun_path holds 108
/// bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

pub async fn serve_unix(core: Shared, listener: UnixListener) {
    let mut warnings = Throttle::default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // A Unix peer has no address: its pid names it in logs.
                let label = match stream.peer_cred().ok().and_then(|c| c.pid()) {
                    Some(pid) => format!("pid {pid}"),
                    None => "a local process".to_string(),
                };
                let peer = Peer { label, fd: Some(stream.as_raw_fd()), via: Via::Unix };
                tokio::task::spawn_local(socket_connection(core.clone(), stream, peer));
            }
            Err(e) => accept_error(e, &mut warnings).await,
        }
    }
}

/// The TCP listener; with `tls`, each connection is a TLS handshake first.
pub async fn serve_tcp(core: Shared, listener: TcpListener, tls: Option<Tls>) {
    let mut warnings = Throttle::default();
    let tls = tls.map(Rc::new);
    if let Some(tls) = &tls {
        tls.watch();
    }
    loop {
        match listener.accept().await {
            Ok((stream, addr)) => {
                let _ = stream.set_nodelay(true);
                let peer = Peer { label: addr.to_string(), fd: Some(stream.as_raw_fd()), via: Via::Tcp };
                match &tls {
                    Some(tls) => tokio::task::spawn_local(tls_connection(core.clone(), tls.clone(), stream, peer)),
                    None => tokio::task::spawn_local(socket_connection(core.clone(), stream, peer)),
                };
            }
            Err(e) => accept_error(e, &mut warnings).await,
        }
    }
}

/// A TLS connection: the handshake within core.hello_timeout (counted
/// against core.max_connections), then the instance as over plain TCP. A
/// peer that speaks plaintext, has no certificate the listener asks for, or
/// stalls is closed, counted and logged (throttled).
async fn tls_connection(core: Shared, tls: Rc<Tls>, stream: TcpStream, peer: Peer) {
    let handshaking = match start_handshake(&core, &peer) {
        Ok(h) => h,
        Err(_) => return, // no session to write the refusal in
    };
    let timeout = core.borrow().limits().hello_timeout;
    let why = match tokio::time::timeout(timeout, tls.accept(stream)).await {
        Ok(Ok(session)) => {
            drop(handshaking);
            return socket_connection(core, TlsSocket(session), peer).await;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("not finished within {} ms (core.hello_timeout)", timeout.as_millis()),
    };
    tls.listener().count_handshake_failure();
    core.borrow_mut().handshake_refusals().warn(|n| {
        format!("refused {n} connection(s) in the handshake; last from {}: TLS handshake: {why}", peer.label)
    });
}

/// A TLS session of the TCP listener. Handed to another shard whole: its
/// socket stays registered with shard 0's runtime, whose reactor wakes the
/// serving shard, which does the reading, writing and cryptography
/// (tokio-rustls cannot take a session apart to rebuild it elsewhere).
struct TlsSocket(cumulo_tls::ServerStream<TcpStream>);

impl AsRawFd for TlsSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.0.get_ref().0.as_raw_fd()
    }
}

/// Out of descriptors or similar: say so (throttled) and back off instead
/// of spinning.
async fn accept_error(e: std::io::Error, warnings: &mut Throttle) {
    warnings.warn(|n| format!("accept failed {n} times, last: {e} (check ulimit -n against max_connections)"));
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A read buffer holding unparsed bytes at `buf[start..]` (also the CloudI
/// adapter's, `cloudi::connection`).
pub(crate) struct ReadBuf {
    pub(crate) buf: Vec<u8>,
    pub(crate) start: usize,
}

impl ReadBuf {
    /// Reads more bytes; Ok(false) at end of stream.
    pub(crate) async fn fill<R: AsyncRead + Unpin>(&mut self, rd: &mut R, want: usize) -> std::io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // Room for the rest of the frame being read (or a chunk), exactly:
        // the buffer never grows past one frame plus a chunk.
        let room = want.saturating_sub(self.buf.len()).max(READ_CHUNK);
        if self.buf.capacity() - self.buf.len() < room {
            self.buf.reserve_exact(room);
        }
        Ok(rd.read_buf(&mut self.buf).await? > 0)
    }
}

async fn write_error<W: AsyncWrite + Unpin>(wr: &mut W, status: Status, message: &str) {
    let mut out = Vec::new();
    cumulo_router::frames::error(&mut out, status, message);
    let _ = tokio::time::timeout(CLOSE_GRACE, wr.write_all(&out)).await;
}

/// Who is at the other end of a connection (for logs) and its socket's
/// read side (for the keep-alive check).
pub struct Peer {
    pub label: String,
    pub fd: Option<RawFd>,
    /// The listener it came through (an in-memory stream counts as the
    /// Unix socket: it is this process's own).
    pub via: Via,
}

/// Serves one instance connection from handshake to close. Any byte
/// stream will do: the listeners pass sockets, the fuzz targets in-memory
/// streams.
#[cfg(any(test, feature = "fuzzing"))]
pub async fn connection<R, W>(core: Shared, rd: R, wr: W)
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    connection_from(core, rd, wr, Peer { label: "an in-memory peer".into(), fd: None, via: Via::Unix }).await
}

/// A connection refused before it became an instance: the ERROR it gets.
struct Refusal {
    status: Status,
    message: String,
}

impl Refusal {
    fn new(status: Status, message: impl Into<String>) -> Refusal {
        Refusal { status, message: message.into() }
    }
}

/// Counts a connection in the handshake against core.max_connections
/// until it is admitted or refused.
struct Handshaking(Shared);

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.borrow_mut().handshake_ended();
    }
}

/// As `connection`, naming the peer in logs. The connection stays on this
/// shard (a stream that is not a socket cannot be handed over).
#[cfg(any(test, feature = "fuzzing"))]
async fn connection_from<R, W>(core: Shared, mut rd: R, mut wr: W, peer: Peer)
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    if let Some(Handshaken::Here { id, rb, outbox }) = handshake(&core, &mut rd, &mut wr, &peer, false).await {
        serve_admitted(&core, id, rd, wr, rb, outbox).await;
    }
}

/// A socket the listeners accept, which may be handed to another shard
/// after its HELLO (`shards::handoff`).
trait Socket: Sized + 'static {
    type R: AsyncRead + Unpin + 'static;
    type W: AsyncWrite + Unpin + 'static;
    fn split(self) -> (Self::R, Self::W);
    /// The halves back together, out of this runtime.
    fn into_std(rd: Self::R, wr: Self::W) -> std::io::Result<StdSocket>;
}

impl Socket for UnixStream {
    type R = tokio::net::unix::OwnedReadHalf;
    type W = tokio::net::unix::OwnedWriteHalf;
    fn split(self) -> (Self::R, Self::W) {
        self.into_split()
    }
    fn into_std(rd: Self::R, wr: Self::W) -> std::io::Result<StdSocket> {
        let s = rd.reunite(wr).map_err(|e| std::io::Error::other(e.to_string()))?;
        s.into_std().map(StdSocket::Unix)
    }
}

impl Socket for TlsSocket {
    type R = tokio::io::ReadHalf<cumulo_tls::ServerStream<TcpStream>>;
    type W = tokio::io::WriteHalf<cumulo_tls::ServerStream<TcpStream>>;
    fn split(self) -> (Self::R, Self::W) {
        tokio::io::split(self.0)
    }
    fn into_std(rd: Self::R, wr: Self::W) -> std::io::Result<StdSocket> {
        Ok(StdSocket::Other(Box::new(TlsSocket(rd.unsplit(wr)))))
    }
}

impl Socket for TcpStream {
    type R = tokio::net::tcp::OwnedReadHalf;
    type W = tokio::net::tcp::OwnedWriteHalf;
    fn split(self) -> (Self::R, Self::W) {
        self.into_split()
    }
    fn into_std(rd: Self::R, wr: Self::W) -> std::io::Result<StdSocket> {
        let s = rd.reunite(wr).map_err(|e| std::io::Error::other(e.to_string()))?;
        s.into_std().map(StdSocket::Tcp)
    }
}

/// A listener's connection: its handshake here, then served here or handed
/// to the shard shard 0 picked for it.
async fn socket_connection<S: Socket>(core: Shared, stream: S, peer: Peer) {
    let (mut rd, mut wr) = stream.split();
    match handshake(&core, &mut rd, &mut wr, &peer, true).await {
        Some(Handshaken::Here { id, rb, outbox }) => {
            serve_admitted(&core, id, rd, wr, rb, outbox).await;
        }
        Some(Handshaken::Elsewhere { accepted, rest }) => hand_over(&core, accepted, rest, S::into_std(rd, wr), peer),
        None => {}
    }
}

/// A connection holds a descriptor and a buffer from its first byte: it
/// counts against core.max_connections before it says HELLO (and before
/// its TLS handshake). Err: the refusal, logged (throttled).
fn start_handshake(core: &Shared, peer: &Peer) -> Result<Handshaking, String> {
    let mut c = core.borrow_mut();
    let max = c.limits().max_connections as usize;
    if c.connections() + c.handshaking() >= max {
        c.limit_refusals()
            .warn(|n| format!("refused {n} connection(s) over core.max_connections ({max}); last from {}", peer.label));
        return Err(format!("connection limit reached ({max} connections, core.max_connections)"));
    }
    c.handshake_started();
    Ok(Handshaking(core.clone()))
}

/// What a handshake ended in.
enum Handshaken {
    /// An instance of this shard: its unread bytes and its outbox (with the
    /// WELCOME in it).
    Here { id: InstanceId, rb: ReadBuf, outbox: Rc<Outbox> },
    /// Admitted for another shard: the bytes read past the HELLO.
    Elsewhere { accepted: Accepted, rest: Vec<u8> },
}

/// Counts the connection against core.max_connections, reads its HELLO
/// and admits it; None when it was refused or closed (the refusal written).
async fn handshake<R, W>(core: &Shared, rd: &mut R, wr: &mut W, peer: &Peer, movable: bool) -> Option<Handshaken>
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    let (max_frame, max_outbox) = {
        let c = core.borrow();
        (c.limits().max_frame, c.limits().max_outbox)
    };
    let handshaking = match start_handshake(core, peer) {
        Ok(h) => h,
        Err(msg) => {
            write_error(wr, Status::InvalidArgument, &msg).await;
            return None;
        }
    };
    let mut rb = ReadBuf { buf: Vec::with_capacity(READ_CHUNK), start: 0 };
    let outbox = Outbox::new(max_outbox);
    let admitted = match read_hello(core, rd, &mut rb).await {
        Ok(total) => admit(core, &rb.buf[LEN_PREFIX..total], &outbox, max_frame, peer, movable).map(|a| (a, total)),
        Err(r) => Err(r),
    };
    drop(handshaking);
    let (accepted, total) = match admitted {
        Ok(a) => a,
        Err(None) => return None, // closed before speaking
        Err(Some(r)) => {
            {
                let mut c = core.borrow_mut();
                c.handshake_refusals().warn(|n| {
                    format!("refused {n} connection(s) in the handshake; last from {}: {}", peer.label, r.message)
                });
            }
            write_error(wr, r.status, &r.message).await;
            return None;
        }
    };
    if accepted.shard != core.borrow().shard().index {
        return Some(Handshaken::Elsewhere { accepted, rest: rb.buf[total..].to_vec() });
    }
    rb.start = total;
    Some(Handshaken::Here { id: accepted.id, rb, outbox })
}

/// Serves an admitted instance's connection (its WELCOME queued) until it
/// ends, and removes the instance. Returns whether the keep-alive check
/// closed it as hung.
pub(crate) async fn serve_admitted<R, W>(
    core: &Shared,
    id: InstanceId,
    mut rd: R,
    wr: W,
    mut rb: ReadBuf,
    outbox: Rc<Outbox>,
) -> bool
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    let (max_frame, max_outbox) = {
        let c = core.borrow();
        (c.limits().max_frame, c.limits().max_outbox)
    };
    let prefix_for_log = core.borrow().instance(&id).map_or_else(|| Rc::from(""), |i| i.prefix().clone());
    let writer = tokio::task::spawn_local(write_loop(outbox.clone(), wr));
    let why = read_loop(core, id, &mut rd, &mut rb, &outbox, max_frame).await;
    let why = if outbox.overflowed.get() {
        core.borrow_mut().count_slow_consumer();
        CloseReason::SlowConsumer { max_outbox }
    } else {
        why
    };
    if why.by_peer() {
        tracing::debug!(instance = id, "{prefix_for_log} instance {id}: {why}");
    } else {
        tracing::warn!(instance = id, "closing {prefix_for_log} instance {id}: {why}");
    }
    let hung = core.borrow().instance(&id).is_some_and(|i| i.silent_rounds() >= HUNG_AFTER_ROUNDS);
    core.borrow_mut().remove_instance(id, &why.to_string());
    outbox.close();
    let _ = writer.await;
    core.borrow_mut().connection_task_ended();
    hung
}

/// Shard 0: hands a connection admitted for another shard to that shard.
fn hand_over(core: &Shared, a: Accepted, rest: Vec<u8>, socket: std::io::Result<StdSocket>, peer: Peer) {
    let mut c = core.borrow_mut();
    let socket = match socket {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(instance = a.id, "{}: cannot hand its connection to shard {}: {e}", a.label, a.shard);
            return c.gone_elsewhere(a.id, false);
        }
    };
    let adoption = Adoption {
        socket: Some(socket),
        peer: peer.label,
        rest,
        id: a.id,
        prefix: a.prefix.to_string(),
        label: a.label,
        origin: a.origin.map(|o| (o.service, o.process_index, o.token.to_string())),
        options: ServiceOptions::clone(&a.options),
        window: a.window,
        process_index: a.process_index,
        process_count: a.process_count,
        thread_count: a.thread_count,
    };
    c.handoff_mut().order(a.shard, Order::Adopt(Box::new(adoption)));
}

/// Another shard: registers a connection shard 0 handed over, writes its
/// WELCOME and serves it until it ends (as `serve_admitted`). Returns
/// whether the keep-alive check closed it as hung.
pub(crate) async fn serve_handed(core: &Shared, mut a: Adoption) -> Result<bool, String> {
    let handed = |e: std::io::Error| format!("{}: {e}", a.label);
    match a.socket.take() {
        Some(StdSocket::Unix(s)) => {
            s.set_nonblocking(true).map_err(handed)?;
            let s = UnixStream::from_std(s).map_err(handed)?;
            adopt_and_serve(core, s, &a).await
        }
        Some(StdSocket::Tcp(s)) => {
            s.set_nonblocking(true).map_err(handed)?;
            let s = TcpStream::from_std(s).map_err(handed)?;
            adopt_and_serve(core, s, &a).await
        }
        Some(StdSocket::Other(s)) => match s.downcast::<TlsSocket>() {
            Ok(s) => adopt_and_serve(core, *s, &a).await,
            Err(_) => Err(format!("{}: a stream of an unknown kind was handed over", a.label)),
        },
        None => Err(format!("{}: no socket handed over", a.label)),
    }
}

async fn adopt_and_serve<S: Socket + AsRawFd>(core: &Shared, stream: S, a: &Adoption) -> Result<bool, String> {
    let fd = stream.as_raw_fd();
    let (rd, mut wr) = stream.split();
    let outbox = Outbox::new(core.borrow().limits().max_outbox);
    let adopted = core.borrow_mut().adopt(a, Endpoint::Socket(outbox.clone()));
    if let Err(why) = adopted {
        write_error(&mut wr, Status::ShuttingDown, &why).await;
        return Err(why);
    }
    {
        let mut c = core.borrow_mut();
        let max_frame = c.limits().max_frame;
        let shape = (a.process_index, a.process_count, a.thread_count, a.window);
        welcome(&mut c, &outbox, a.id, shape, &a.options, &a.prefix, max_frame, Some(fd));
    }
    let mut buf = Vec::with_capacity(READ_CHUNK.max(a.rest.len()));
    buf.extend_from_slice(&a.rest);
    tracing::trace!(instance = a.id, "handed over from {}", a.peer);
    Ok(serve_admitted(core, a.id, rd, wr, ReadBuf { buf, start: 0 }, outbox).await)
}

/// Reads the first frame, which must be HELLO, within core.hello_timeout:
/// a client that connects and never speaks holds a descriptor no longer.
/// Returns its length (prefix included); `Err(None)` when the peer closed.
async fn read_hello<R: AsyncRead + Unpin>(
    core: &Shared,
    rd: &mut R,
    rb: &mut ReadBuf,
) -> Result<usize, Option<Refusal>> {
    let (max_frame, hello_timeout) = {
        let c = core.borrow();
        (c.limits().max_frame, c.limits().hello_timeout)
    };
    let limit = MAX_HELLO_FRAME.min(max_frame);
    let read = tokio::time::timeout(hello_timeout, async {
        loop {
            match next_frame_len(&rb.buf, limit) {
                Ok(Some(total)) => return Ok(total),
                Ok(None) => match rb.fill(rd, 0).await {
                    Ok(true) => {}
                    _ => return Err(None),
                },
                Err(DecodeError::TooLarge { len, .. }) => {
                    let msg = format!("the first frame announces {len} bytes; a HELLO is at most {limit}");
                    return Err(Some(Refusal::new(Status::TooLarge, msg)));
                }
                Err(e) => return Err(Some(Refusal::new(e.status(), e.to_string()))),
            }
        }
    })
    .await;
    read.unwrap_or_else(|_| {
        let msg = format!("no HELLO within {} ms of connecting (core.hello_timeout)", hello_timeout.as_millis());
        Err(Some(Refusal::new(Status::Protocol, msg)))
    })
}

/// Admits the connection that sent `frame` as its first frame (HELLO):
/// queues its WELCOME and returns its instance id.
fn admit(
    core: &Shared,
    frame: &[u8],
    outbox: &Rc<Outbox>,
    max_frame: u32,
    peer: &Peer,
    movable: bool,
) -> Result<Accepted, Option<Refusal>> {
    let fd = peer.fd;
    let h = match decode(frame) {
        Ok(Frame::Hello(h)) => h,
        Ok(other) => {
            return Err(Some(Refusal::new(
                Status::Protocol,
                format!("expected HELLO first, got {}", other.type_name()),
            )))
        }
        Err(e) => return Err(Some(Refusal::new(e.status(), e.to_string()))),
    };
    if h.version == 0 {
        let msg =
            format!("protocol version {} is not supported; this core speaks {}", h.version, cumulo_proto::VERSION);
        return Err(Some(Refusal::new(Status::UnsupportedVersion, msg)));
    }
    let mut c = core.borrow_mut();
    let a = c
        .admit_on_a_shard(&h, Endpoint::Socket(outbox.clone()), movable, peer.via)
        .map_err(|e| Some(Refusal::new(e.status, e.why)))?;
    if a.shard != c.shard().index {
        return Ok(a); // its WELCOME is written by the shard that serves it
    }
    let shape = (a.process_index, a.process_count, a.thread_count, a.window);
    welcome(&mut c, outbox, a.id, shape, &a.options, &a.prefix, max_frame, fd);
    Ok(a)
}

/// Queues the WELCOME of instance `id`, admitted here or adopted from shard
/// 0, and counts its connection task. `shape`: process index, process
/// count, thread count, window.
#[expect(clippy::too_many_arguments, reason = "the fields of one WELCOME, from two kinds of admission")]
fn welcome(
    c: &mut cumulo_router::Core,
    outbox: &Outbox,
    id: InstanceId,
    shape: (u32, u32, u32, u32),
    options: &ServiceOptions,
    prefix: &str,
    max_frame: u32,
    fd: Option<RawFd>,
) {
    let (process_index, process_count, thread_count, window) = shape;
    let w = cumulo_proto::Welcome {
        version: cumulo_proto::VERSION,
        node_id: c.limits().node_id,
        instance_id: id,
        process_index,
        process_count,
        thread_count,
        window,
        max_frame,
        timeout_async: options.timeout_async,
        timeout_sync: options.timeout_sync,
        timeout_terminate: options.timeout_terminate,
        priority_default: options.priority_default,
        keepalive: c.limits().keepalive.as_millis() as u32,
        prefix,
    };
    outbox.push(|b| cumulo_router::frames::welcome(b, &w));
    c.connection_task_started();
    if let Some(inst) = c.instance_mut(&id) {
        inst.set_rx_fd(fd);
    }
}

/// Reads and routes frames until the connection ends; returns why it ended.
async fn read_loop<R: AsyncRead + Unpin>(
    core: &Shared,
    id: InstanceId,
    rd: &mut R,
    rb: &mut ReadBuf,
    outbox: &Rc<Outbox>,
    max_frame: u32,
) -> CloseReason {
    loop {
        // Route every complete frame in the buffer under one borrow of the
        // core: a burst of frames costs one borrow and, through the outbox,
        // one write per destination.
        let mut want = 0;
        {
            let mut c = core.borrow_mut();
            let now = std::time::Instant::now();
            c.set_now(now);
            if let Some(inst) = c.instance_mut(&id) {
                inst.heard_from(now);
            }
            loop {
                let data = &rb.buf[rb.start..];
                let total = match next_frame_len(data, max_frame) {
                    Ok(Some(total)) => total,
                    Ok(None) => {
                        if data.len() >= LEN_PREFIX {
                            want = LEN_PREFIX + u32::from_le_bytes(data[..4].try_into().unwrap()) as usize;
                        }
                        break;
                    }
                    Err(e) => return protocol_error(&mut c, outbox, e),
                };
                let frame = match decode(&data[LEN_PREFIX..total]) {
                    Ok(f) => f,
                    Err(e) => return protocol_error(&mut c, outbox, e),
                };
                if let Err(cumulo_router::RouteError { status, why: msg }) = c.handle_frame(id, frame) {
                    c.count_protocol_error();
                    outbox.push(|b| cumulo_router::frames::error(b, status, &msg));
                    outbox.close();
                    return CloseReason::Protocol(msg);
                }
                rb.start += total;
            }
        }
        tokio::select! {
            r = rb.fill(rd, want) => match r {
                Ok(true) => {}
                Ok(false) => return CloseReason::ByPeer(None),
                Err(e) => return CloseReason::ByPeer(Some(e.to_string())),
            },
            _ = outbox.cancel.cancelled() => return CloseReason::ByCore,
        }
    }
}

fn protocol_error(c: &mut cumulo_router::Core, outbox: &Outbox, e: DecodeError) -> CloseReason {
    c.count_protocol_error();
    let msg = e.to_string();
    outbox.push(|b| cumulo_router::frames::error(b, e.status(), &msg));
    outbox.close();
    CloseReason::Protocol(msg)
}

pub(crate) async fn write_loop<W: AsyncWrite + Unpin>(outbox: Rc<Outbox>, mut wr: W) {
    let mut batch = Vec::with_capacity(READ_CHUNK);
    while outbox.next_batch(&mut batch).await {
        let stalled = async {
            outbox.cancel.cancelled().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        let ok = tokio::select! {
            r = wr.write_all(&batch) => r.is_ok(),
            _ = stalled => false,
        };
        batch.clear();
        if !ok {
            outbox.close();
            break;
        }
        if batch.capacity() > 4 * 1024 * 1024 {
            batch = Vec::with_capacity(READ_CHUNK); // give back a burst's memory
        }
    }
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::bind_unix;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    #[test]
    fn the_socket_appears_listening_and_user_only_and_a_stale_one_is_replaced() {
        let dir = std::env::temp_dir().join(format!("cumulo-bind-{}", std::process::id()));
        let path = dir.join("core.sock");
        let _ = std::fs::remove_dir_all(&dir);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let first = bind_unix(&path).expect("binds");
            let meta = std::fs::metadata(&path).unwrap();
            assert!(meta.file_type().is_socket());
            assert_eq!(meta.permissions().mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
            std::os::unix::net::UnixStream::connect(&path).expect("listening as soon as it is there");
            let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names, ["core.sock"], "no temporary name left behind");
            let err = bind_unix(&path).expect_err("a listening socket is not taken over");
            assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
            drop(first);
            let _second = bind_unix(&path).expect("a stale socket file is replaced");
            std::os::unix::net::UnixStream::connect(&path).expect("the new one listens");
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
