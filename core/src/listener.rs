//! The external-service listener: accepts instance connections (Unix socket,
//! optionally TCP), runs the handshake, then one reader and one writer task
//! per connection. The reader decodes frames in place from its buffer and
//! hands each to the routing code; the writer flushes the connection's outbox.

use crate::instance::{Endpoint, Outbox};
use crate::log_throttle::Throttle;
use crate::registry::InstanceId;
use crate::state::Shared;
use cumulo_proto::{decode, next_frame_len, DecodeError, Frame, Status, LEN_PREFIX};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};

/// Bytes read per system call at most; also the initial buffer size.
const READ_CHUNK: usize = 64 * 1024;
/// How long buffered frames (an ERROR, say) may take to leave once the core
/// has closed a connection, before the connection is dropped regardless.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Binds the Unix socket: its folder is created private to the user, a stale
/// socket file is replaced, and the socket itself is user-only (0600).
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
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

pub async fn serve_unix(core: Shared, listener: UnixListener) {
    let mut warnings = Throttle::default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let (rd, wr) = stream.into_split();
                tokio::task::spawn_local(connection(core.clone(), rd, wr));
            }
            Err(e) => accept_error(e, &mut warnings).await,
        }
    }
}

pub async fn serve_tcp(core: Shared, listener: TcpListener) {
    let mut warnings = Throttle::default();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let (rd, wr) = stream.into_split();
                tokio::task::spawn_local(connection(core.clone(), rd, wr));
            }
            Err(e) => accept_error(e, &mut warnings).await,
        }
    }
}

/// Out of descriptors or similar: say so (throttled) and back off instead
/// of spinning.
async fn accept_error(e: std::io::Error, warnings: &mut Throttle) {
    warnings.warn(|n| format!("accept failed {n} times, last: {e} (check ulimit -n against max_connections)"));
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A read buffer holding unparsed bytes at `buf[start..]`.
struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
}

impl ReadBuf {
    /// Reads more bytes; Ok(false) at end of stream.
    async fn fill<R: AsyncRead + Unpin>(&mut self, rd: &mut R, want: usize) -> std::io::Result<bool> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let room = want.max(READ_CHUNK);
        if self.buf.capacity() - self.buf.len() < room {
            self.buf.reserve(room);
        }
        Ok(rd.read_buf(&mut self.buf).await? > 0)
    }
}

async fn write_error<W: AsyncWrite + Unpin>(wr: &mut W, status: Status, message: &str) {
    let mut out = Vec::new();
    cumulo_proto::encode_error(&mut out, status.code(), message);
    let _ = tokio::time::timeout(CLOSE_GRACE, wr.write_all(&out)).await;
}

/// Serves one instance connection from handshake to close. Any byte
/// stream will do: the listeners pass sockets, the fuzz targets in-memory
/// streams.
pub async fn connection<R, W>(core: Shared, mut rd: R, mut wr: W)
where
    R: AsyncRead + Unpin + 'static,
    W: AsyncWrite + Unpin + 'static,
{
    let (max_frame, max_outbox, hello_timeout) = {
        let c = core.borrow();
        (c.limits.max_frame, c.limits.max_outbox, c.limits.hello_timeout)
    };
    let mut rb = ReadBuf { buf: Vec::with_capacity(READ_CHUNK), start: 0 };

    // Handshake: the first frame must be HELLO, within core.hello_timeout: a
    // client that connects and never speaks holds a descriptor no longer.
    let hello = tokio::time::timeout(hello_timeout, async {
        loop {
            match next_frame_len(&rb.buf, max_frame) {
                Ok(Some(total)) => return Ok(total),
                Ok(None) => match rb.fill(&mut rd, 0).await {
                    Ok(true) => {}
                    _ => return Err(None),
                },
                Err(e) => return Err(Some(e)),
            }
        }
    })
    .await;
    let total = match hello {
        Ok(Ok(total)) => total,
        Ok(Err(None)) => return, // closed before speaking
        Ok(Err(Some(e))) => return write_error(&mut wr, e.status(), &e.to_string()).await,
        Err(_) => {
            let msg = format!("no HELLO within {} ms of connecting (core.hello_timeout)", hello_timeout.as_millis());
            return write_error(&mut wr, Status::Protocol, &msg).await;
        }
    };
    let outbox = Outbox::new(max_outbox);
    let (id, prefix_for_log) = match decode(&rb.buf[LEN_PREFIX..total]) {
        Ok(Frame::Hello(h)) if h.version == 0 => {
            let msg = format!("protocol version {} is not supported; this core speaks {}", h.version, cumulo_proto::VERSION);
            return write_error(&mut wr, Status::UnsupportedVersion, &msg).await;
        }
        Ok(Frame::Hello(h)) => {
            let mut c = core.borrow_mut();
            match c.admit(h.token, h.prefix, h.thread_index, h.window, Endpoint::Socket(outbox.clone())) {
                Ok(a) => {
                    let w = cumulo_proto::Welcome {
                        version: cumulo_proto::VERSION,
                        node_id: c.limits.node_id,
                        instance_id: a.id,
                        process_index: a.process_index,
                        process_count: a.process_count,
                        thread_count: a.thread_count,
                        window: a.window,
                        max_frame,
                        timeout_async: a.options.timeout_async,
                        timeout_sync: a.options.timeout_sync,
                        timeout_terminate: a.options.timeout_terminate,
                        priority_default: a.options.priority_default,
                        keepalive: c.limits.keepalive.as_millis() as u32,
                        prefix: &a.prefix,
                    };
                    outbox.push(|b| cumulo_proto::encode_welcome(b, &w));
                    c.connection_tasks += 1;
                    (a.id, a.prefix.clone())
                }
                Err((status, msg)) => {
                    drop(c);
                    tracing::warn!("refused a connection: {msg}");
                    return write_error(&mut wr, status, &msg).await;
                }
            }
        }
        Ok(other) => {
            let msg = format!("expected HELLO first, got {}", other.type_name());
            return write_error(&mut wr, Status::Protocol, &msg).await;
        }
        Err(e) => return write_error(&mut wr, e.status(), &e.to_string()).await,
    };
    rb.start = total;
    let writer = tokio::task::spawn_local(write_loop(outbox.clone(), wr));
    let why = read_loop(&core, id, &mut rd, &mut rb, &outbox, max_frame).await;
    let why = if outbox.overflowed.get() {
        core.borrow_mut().stats.slow_consumers += 1;
        format!("slow consumer: more than {max_outbox} bytes waiting to be read")
    } else {
        why
    };
    if why.starts_with("closed by the peer") {
        tracing::debug!(instance = id, "{prefix_for_log} instance {id}: {why}");
    } else {
        tracing::warn!(instance = id, "closing {prefix_for_log} instance {id}: {why}");
    }
    core.borrow_mut().remove_instance(id, &why);
    outbox.close();
    let _ = writer.await;
    core.borrow_mut().connection_tasks -= 1;
}

/// Reads and routes frames until the connection ends; returns why it ended.
async fn read_loop<R: AsyncRead + Unpin>(
    core: &Shared,
    id: InstanceId,
    rd: &mut R,
    rb: &mut ReadBuf,
    outbox: &Rc<Outbox>,
    max_frame: u32,
) -> String {
    loop {
        // Route every complete frame in the buffer under one borrow of the
        // core: a burst of frames costs one borrow and, through the outbox,
        // one write per destination.
        let mut want = 0;
        {
            let mut c = core.borrow_mut();
            let now = std::time::Instant::now();
            c.now = now;
            if let Some(inst) = c.instances.get_mut(&id) {
                inst.last_rx = now;
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
                if let Err((status, msg)) = c.handle_frame(id, frame) {
                    c.stats.protocol_errors += 1;
                    outbox.push(|b| cumulo_proto::encode_error(b, status.code(), &msg));
                    outbox.close();
                    return msg;
                }
                rb.start += total;
            }
        }
        tokio::select! {
            r = rb.fill(rd, want) => match r {
                Ok(true) => {}
                Ok(false) => return "closed by the peer".into(),
                Err(e) => return format!("closed by the peer: {e}"),
            },
            _ = outbox.cancel.cancelled() => return "closed by the core".into(),
        }
    }
}

fn protocol_error(c: &mut crate::state::Core, outbox: &Outbox, e: DecodeError) -> String {
    c.stats.protocol_errors += 1;
    let msg = e.to_string();
    outbox.push(|b| cumulo_proto::encode_error(b, e.status().code(), &msg));
    outbox.close();
    msg
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
