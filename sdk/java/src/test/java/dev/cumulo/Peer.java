package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.io.ByteArrayOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;

/** One accepted connection, seen from the core: blocking reads and writes of whole frames. */
final class Peer implements AutoCloseable {
    static final long NODE_ID = 1;
    static final long INSTANCE_ID = 7;
    static final String PREFIX = "/test/";

    private final SocketChannel channel;

    Peer(SocketChannel channel) {
        this.channel = channel;
    }

    static Frame.Welcome welcome(long maxFrame, String prefix) {
        return new Frame.Welcome(1, NODE_ID, INSTANCE_ID, 2, 4, 3, 1, maxFrame, 5000, 6000, 2000, -1, 5000, prefix);
    }

    /** Reads HELLO and answers with a standard WELCOME. */
    Frame.Hello handshake(long maxFrame) throws IOException {
        Frame.Hello hello = read(Frame.Hello.class);
        write(welcome(maxFrame, PREFIX));
        return hello;
    }

    Frame.Hello handshake() throws IOException {
        return handshake(1 << 20);
    }

    Frame read() throws IOException {
        ByteBuffer header = readFully(4);
        long length = header.getInt() & 0xffffffffL;
        ByteBuffer rest = readFully(Codec.checkLength(length, 1 << 24));
        int type = rest.get() & 0xff;
        return Codec.decodeBody(type, rest);
    }

    <T extends Frame> T read(Class<T> expected) throws IOException {
        return assertInstanceOf(expected, read());
    }

    /** Answers a control request with OK and a value. */
    Frame.Control replyTo(FrameType type, String pattern, long value) throws IOException {
        Frame.Control control = read(Frame.Control.class);
        assertEquals(type, control.type());
        assertEquals(pattern, control.pattern());
        write(new Frame.Reply(control.reqId(), 0, value, ""));
        return control;
    }

    /** All frames in one write, as a core batching its output would. */
    void write(Frame... frames) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Frame frame : frames) {
            out.writeBytes(Codec.encode(frame));
        }
        writeRaw(out.toByteArray());
    }

    void writeRaw(byte[] bytes) throws IOException {
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        while (buffer.hasRemaining()) {
            channel.write(buffer);
        }
    }

    /** True when the client closed its side (after whatever frames were still to be read). */
    boolean atEndOfStream() throws IOException {
        return channel.read(ByteBuffer.allocate(1)) < 0;
    }

    private ByteBuffer readFully(int n) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new EOFException("client closed the connection");
            }
        }
        return buffer.flip();
    }

    @Override
    public void close() throws IOException {
        channel.close();
    }
}
