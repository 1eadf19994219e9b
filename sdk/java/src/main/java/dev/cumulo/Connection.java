package dev.cumulo;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * One socket to the core, framed. Outgoing frames collect in a direct buffer and go out in one
 * write when the owner is about to wait for input (or calls {@link #flush}); incoming bytes are
 * read in as large chunks as are available and split into frames here. Owned by one thread;
 * only {@link #requestStop} may be called from another.
 *
 * <p>Over TLS the socket is a blocking {@link SSLSocket} instead of a channel, chosen once when
 * connecting: its reads wait at most {@link #TLS_STOP_POLL_MS} at a time so that a requested stop is
 * seen.
 */
final class Connection implements Closeable {
    static final long NO_DEADLINE = Long.MAX_VALUE;
    /** Enough for WELCOME or ERROR, the only frames expected before the limits are known. */
    static final long HANDSHAKE_LIMIT = 1 << 17;

    private static final int INITIAL_BUFFER = 64 * 1024;
    private static final int KEEP_BUFFER = 1024 * 1024;
    /** How long a TLS read waits before it looks at {@link #stopRequested} again. */
    static final int TLS_STOP_POLL_MS = 100;
    /** The most plaintext one TLS record carries: the unit of copies to and from the TLS socket. */
    private static final int TLS_CHUNK = 16 * 1024;

    /** Null over TLS, as are selector and key. */
    private final SocketChannel channel;
    private final Selector selector;
    private final SelectionKey key;
    /** Null without TLS, as are the streams and the chunk. */
    private final SSLSocket tls;
    private final InputStream tlsIn;
    private final OutputStream tlsOut;
    private final byte[] tlsChunk;
    /** In read mode: position is the next unread byte, limit the end of the data. */
    private ByteBuffer in = newBuffer(INITIAL_BUFFER).limit(0);
    /** In write mode: frames queued since the last flush. */
    private ByteBuffer out = newBuffer(INITIAL_BUFFER);
    private long sendLimit = HANDSHAKE_LIMIT;
    private long receiveLimit = HANDSHAKE_LIMIT;
    private volatile boolean stopRequested;

    private Connection(SocketChannel channel) throws IOException {
        this.channel = channel;
        channel.configureBlocking(false);
        selector = Selector.open();
        key = channel.register(selector, SelectionKey.OP_READ);
        tls = null;
        tlsIn = null;
        tlsOut = null;
        tlsChunk = null;
    }

    private Connection(SSLSocket tls) throws IOException {
        channel = null;
        selector = null;
        key = null;
        this.tls = tls;
        tlsIn = tls.getInputStream();
        tlsOut = tls.getOutputStream();
        tlsChunk = new byte[TLS_CHUNK];
    }

    /** Connects to a Unix socket path or {@code tcp://host:port}; over TLS when {@code tlsContext} is given. */
    static Connection open(String socket, SSLContext tlsContext, long handshakeTimeoutMs) throws IOException {
        SocketAddress address = address(socket);
        if (tlsContext != null && address instanceof InetSocketAddress inet) {
            return openTls(socket, inet, tlsContext, handshakeTimeoutMs);
        }
        SocketChannel channel = SocketChannel.open(address);
        try {
            if (address instanceof InetSocketAddress) {
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
            }
            return new Connection(channel);
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    /**
     * Connects and completes the TLS handshake here, so that a refused certificate is an error from
     * connecting. The core's certificate must name the host as written in the address (a DNS name
     * or an IP address).
     */
    private static Connection openTls(String socket, InetSocketAddress address, SSLContext context,
                                      long handshakeTimeoutMs) throws IOException {
        Socket plain = new Socket();
        SSLSocket tls = null;
        try {
            plain.connect(address, (int) Math.min(handshakeTimeoutMs, Integer.MAX_VALUE));
            plain.setTcpNoDelay(true);
            tls = (SSLSocket) context.getSocketFactory()
                    .createSocket(plain, address.getHostString(), address.getPort(), true);
            SSLParameters params = tls.getSSLParameters();
            params.setEndpointIdentificationAlgorithm("HTTPS");
            params.setProtocols(new String[] {"TLSv1.3", "TLSv1.2"});
            tls.setSSLParameters(params);
            tls.setSoTimeout((int) Math.min(handshakeTimeoutMs, Integer.MAX_VALUE));
            try {
                tls.startHandshake();
            } catch (SSLException e) {
                throw new SSLException("TLS handshake with " + socket + " failed: " + e.getMessage(), e);
            }
            return new Connection(tls);
        } catch (IOException | RuntimeException e) {
            if (tls != null) {
                tls.close();
            }
            plain.close();
            throw e;
        }
    }

    static SocketAddress address(String socket) {
        if (!socket.startsWith("tcp://")) {
            return UnixDomainSocketAddress.of(socket);
        }
        String hostPort = socket.substring("tcp://".length());
        int colon = hostPort.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalArgumentException("expected tcp://host:port, got " + socket);
        }
        String host = hostPort.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        int port;
        try {
            port = Integer.parseInt(hostPort.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad port in " + socket);
        }
        return new InetSocketAddress(host, port);
    }

    /** Sets the frame limits once WELCOME has told them. */
    void limits(long send, long receive) {
        sendLimit = send;
        receiveLimit = receive;
    }

    long sendLimit() {
        return sendLimit;
    }

    /** Queues a frame; refuses one over the core's limit before writing any of it. */
    void send(Frame frame) throws IOException {
        int size = Codec.encodedSize(frame);
        if (size - 4 > sendLimit) {
            throw new CumuloException(Status.TOO_LARGE, frame.type() + " of " + (size - 4)
                    + " bytes is over the core's limit of " + sendLimit);
        }
        if (out.remaining() < size) {
            flush();
            if (out.capacity() < size) {
                out = newBuffer(size);
            }
        }
        Codec.encode(frame, out, size);
    }

    /** Writes every queued frame. */
    void flush() throws IOException {
        if (out.position() == 0) {
            return;
        }
        out.flip();
        if (tls != null) {
            flushTls();
            return;
        }
        while (out.hasRemaining()) {
            if (channel.write(out) == 0) {
                awaitReady(SelectionKey.OP_WRITE, NO_DEADLINE);
            }
        }
        out = out.capacity() > KEEP_BUFFER ? newBuffer(INITIAL_BUFFER) : out.clear();
    }

    private void flushTls() throws IOException {
        try {
            while (out.hasRemaining()) {
                int n = Math.min(out.remaining(), tlsChunk.length);
                out.get(tlsChunk, 0, n);
                tlsOut.write(tlsChunk, 0, n);
            }
            tlsOut.flush();
        } catch (SocketException e) {
            throw alertOr(e);
        }
        out = out.capacity() > KEEP_BUFFER ? newBuffer(INITIAL_BUFFER) : out.clear();
    }

    /**
     * The next frame, or null when the deadline (System.nanoTime) passes or a stop is requested.
     * Queued frames are flushed before waiting.
     */
    Frame receive(long deadline) throws IOException {
        while (true) {
            Frame frame = nextBuffered();
            if (frame != null) {
                return frame;
            }
            if (stopRequested) {
                return null;
            }
            flush();
            in.compact();
            int n;
            try {
                n = tls == null ? channel.read(in) : readTls(deadline);
            } finally {
                in.flip();
            }
            if (n < 0) {
                throw new EOFException("the core closed the connection");
            }
            if (n == 0 && (tls == null ? !awaitReady(SelectionKey.OP_READ, deadline) : passed(deadline))) {
                return null;
            }
        }
    }

    /**
     * The alert the core sent before closing, if one is there to read, else {@code e}: under TLS
     * 1.3 the core refuses a client certificate after the client's handshake is done, so the
     * refusal's reason is only seen by reading.
     */
    private IOException alertOr(SocketException e) {
        try {
            tls.setSoTimeout(TLS_STOP_POLL_MS);
            tlsIn.read(tlsChunk, 0, 1);
        } catch (SSLException alert) {
            alert.addSuppressed(e);
            return alert;
        } catch (IOException | RuntimeException ignored) {
            // no alert: the write's own error says it
        }
        return e;
    }

    /**
     * Reads what the TLS socket has into {@code in} (in write mode), waiting at most until the
     * deadline or {@link #TLS_STOP_POLL_MS}: the bytes read, 0 when none came, -1 at the end.
     */
    private int readTls(long deadline) throws IOException {
        long waitMs = TLS_STOP_POLL_MS;
        if (deadline != NO_DEADLINE) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return 0;
            }
            waitMs = Math.min(waitMs, Math.max(1, (left + 999_999) / 1_000_000));
        }
        tls.setSoTimeout((int) waitMs);
        int n;
        try {
            n = tlsIn.read(tlsChunk, 0, Math.min(tlsChunk.length, in.remaining()));
        } catch (SocketTimeoutException e) {
            n = 0;
        }
        if (n > 0) {
            in.put(tlsChunk, 0, n);
        }
        if (n == 0 && Thread.currentThread().isInterrupted()) {
            throw new InterruptedIOException("interrupted while waiting for the core");
        }
        return n;
    }

    private static boolean passed(long deadline) {
        return deadline != NO_DEADLINE && deadline - System.nanoTime() <= 0;
    }

    /** Splits one frame off the input, or makes room for the rest of it and returns null. */
    private Frame nextBuffered() throws CumuloException {
        if (in.remaining() < 4) {
            return null;
        }
        int start = in.position();
        int length = Codec.checkLength(in.getInt(start) & 0xffffffffL, receiveLimit);
        if (in.remaining() - 4 < length) {
            reserve(4 + length);
            return null;
        }
        int type = in.get(start + 4) & 0xff;
        ByteBuffer body = in.slice(start + Codec.HEADER_SIZE, length - 1);
        in.position(start + 4 + length);
        Frame frame = Codec.decodeBody(type, body);
        if (!in.hasRemaining() && in.capacity() > KEEP_BUFFER) {
            in = newBuffer(INITIAL_BUFFER).limit(0);
        }
        return frame;
    }

    /** Grows the input buffer so that a frame of {@code bytes} fits, keeping what is unread. */
    private void reserve(int bytes) {
        if (in.capacity() >= bytes) {
            return;
        }
        ByteBuffer bigger = newBuffer(Math.max(bytes, (int) Math.min(2L * in.capacity(), 4 + receiveLimit)));
        bigger.put(in).flip();
        in = bigger;
    }

    /** Waits until the socket is ready for {@code op}; false once the deadline has passed. */
    private boolean awaitReady(int op, long deadline) throws IOException {
        long timeoutMs = 0;
        if (deadline != NO_DEADLINE) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            timeoutMs = Math.max(1, (left + 999_999) / 1_000_000);
        }
        key.interestOps(op);
        try {
            selector.select(timeoutMs);
        } finally {
            selector.selectedKeys().clear();
            key.interestOps(SelectionKey.OP_READ);
        }
        // An interrupted thread's select returns at once: stop instead of spinning.
        if (Thread.currentThread().isInterrupted()) {
            throw new InterruptedIOException("interrupted while waiting for the core");
        }
        return true;
    }

    /** From any thread: makes the owner's current and next waits return at once. */
    void requestStop() {
        stopRequested = true;
        if (selector != null) {
            selector.wakeup();
        }
    }

    boolean stopRequested() {
        return stopRequested;
    }

    @Override
    public void close() throws IOException {
        if (tls != null) {
            tls.close();
            return;
        }
        try {
            channel.close();
        } finally {
            selector.close();
        }
    }

    private static ByteBuffer newBuffer(int capacity) {
        return ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
    }
}
