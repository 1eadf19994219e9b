package dev.cumulo;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/** Frame layouts, byte by byte (PROTOCOL.md sections 2 and 4). */
public final class Codec {
    /** The length field and the type byte. */
    public static final int HEADER_SIZE = 5;

    private Codec() {
    }

    /** Bytes of the whole frame, length field included. */
    public static int encodedSize(Frame frame) {
        FieldSink.Counter counter = new FieldSink.Counter();
        writeBody(frame, counter);
        long size = HEADER_SIZE + counter.size;
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("frame of " + size + " bytes cannot be encoded");
        }
        return (int) size;
    }

    /** The whole frame as bytes. */
    public static byte[] encode(Frame frame) {
        ByteBuffer out = ByteBuffer.allocate(encodedSize(frame));
        encode(frame, out, out.capacity());
        return out.array();
    }

    /**
     * Writes the whole frame at the buffer's position. {@code size} must be
     * {@link #encodedSize(Frame)} and fit in the buffer's remaining space.
     */
    static void encode(Frame frame, ByteBuffer out, int size) {
        ByteBuffer le = out.order() == ByteOrder.LITTLE_ENDIAN ? out : out.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        int start = le.position();
        le.putInt(size - 4);
        le.put((byte) frame.type().code());
        writeBody(frame, new FieldSink.Writer(le));
        if (le.position() - start != size) {
            throw new IllegalStateException("frame size changed while encoding");
        }
        if (le != out) {
            out.position(le.position());
        }
    }

    /**
     * Checks a frame's length field against the receiver's limit: 0 is malformed (no type byte),
     * over the limit is TOO_LARGE, decided before any of the body is read.
     */
    public static int checkLength(long length, long limit) throws CumuloException {
        if (length < 1) {
            throw new CumuloException(Status.MALFORMED, "frame length 0 leaves no room for the type byte");
        }
        if (length > limit) {
            throw new CumuloException(Status.TOO_LARGE,
                    "frame of " + length + " bytes is over the limit of " + limit);
        }
        return (int) length;
    }

    /** Decodes exactly one whole frame, length field included. */
    public static Frame decode(byte[] frame, long limit) throws CumuloException {
        ByteBuffer in = ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN);
        if (in.remaining() < 4) {
            throw new CumuloException(Status.MALFORMED, "frame shorter than its length field");
        }
        int length = checkLength(in.getInt() & 0xffffffffL, limit);
        if (in.remaining() != length) {
            throw new CumuloException(Status.MALFORMED,
                    "length field says " + length + " bytes, " + in.remaining() + " follow");
        }
        int type = in.get() & 0xff;
        return decodeBody(type, in);
    }

    /** Decodes a body (everything after the type byte) that must be consumed exactly. */
    public static Frame decodeBody(int typeCode, ByteBuffer body) throws CumuloException {
        FrameType type = FrameType.fromCode(typeCode);
        if (type == null) {
            throw new CumuloException(Status.MALFORMED, String.format("unknown frame type 0x%02x", typeCode));
        }
        FieldReader r = new FieldReader(body, type);
        Frame frame = switch (type) {
            case HELLO -> new Frame.Hello(r.u16(), r.u32(), r.u32(), r.str(), r.str());
            case SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE_COUNT -> new Frame.Control(type, r.u32(), r.str());
            case SEND_ASYNC, SEND_SYNC, MCAST_ASYNC, FORWARD ->
                    new Frame.Send(type, r.tid(), r.u32(), r.i8(), r.u8(), r.str(), r.bytes(), r.bytes());
            case RETURN -> new Frame.Return(r.tid(), r.u16(), r.bytes(), r.bytes());
            case PING -> new Frame.Ping(r.u64());
            case PONG -> new Frame.Pong(r.u64());
            case GOODBYE -> new Frame.Goodbye();
            case WELCOME -> new Frame.Welcome(r.u16(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32(), r.u32(),
                    r.u32(), r.u32(), r.u32(), r.u32(), r.i8(), r.u32(), r.str());
            case REQUEST -> new Frame.Request(r.tid(), r.u32(), r.i8(), r.u8(), r.u64(), r.str(), r.str(),
                    r.bytes(), r.bytes());
            case RESPONSE -> new Frame.Response(r.tid(), r.u16(), r.bytes(), r.bytes());
            case REPLY -> new Frame.Reply(r.u32(), r.u16(), r.u32(), r.str());
            case MCAST_SENT -> readMcastSent(r);
            case TERMINATE -> new Frame.Terminate(r.u32());
            case ERROR -> new Frame.Error(r.u16(), r.str());
        };
        r.end();
        return frame;
    }

    private static Frame.McastSent readMcastSent(FieldReader r) throws CumuloException {
        TransId call = r.tid();
        long count = r.u32();
        // Grows as ids are actually read, so a huge count in a short frame allocates nothing.
        List<TransId> copies = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            copies.add(r.tid());
        }
        return new Frame.McastSent(call, copies);
    }

    private static void writeBody(Frame frame, FieldSink s) {
        if (frame instanceof Frame.Hello f) {
            s.u16(f.version(), "version");
            s.u32(f.window(), "window");
            s.u32(f.threadIndex(), "thread_index");
            s.str(f.token(), "token");
            s.str(f.prefix(), "prefix");
        } else if (frame instanceof Frame.Control f) {
            s.u32(f.reqId(), "req_id");
            s.str(f.pattern(), "pattern");
        } else if (frame instanceof Frame.Send f) {
            s.tid(f.transId(), "trans_id");
            s.u32(f.timeout(), "timeout");
            s.i8(f.priority(), "priority");
            s.u8(f.flags(), "flags");
            s.str(f.name(), "name");
            s.bytes(f.requestInfo());
            s.bytes(f.request());
        } else if (frame instanceof Frame.Return f) {
            writeAnswer(s, f.transId(), f.status(), f.responseInfo(), f.response());
        } else if (frame instanceof Frame.Ping f) {
            s.u64(f.nonce());
        } else if (frame instanceof Frame.Pong f) {
            s.u64(f.nonce());
        } else if (frame instanceof Frame.Goodbye) {
            return;
        } else if (frame instanceof Frame.Welcome f) {
            s.u16(f.version(), "version");
            s.u32(f.nodeId(), "node_id");
            s.u32(f.instanceId(), "instance_id");
            s.u32(f.processIndex(), "process_index");
            s.u32(f.processCount(), "process_count");
            s.u32(f.threadCount(), "thread_count");
            s.u32(f.window(), "window");
            s.u32(f.maxFrame(), "max_frame");
            s.u32(f.timeoutAsync(), "timeout_async");
            s.u32(f.timeoutSync(), "timeout_sync");
            s.u32(f.timeoutTerminate(), "timeout_terminate");
            s.i8(f.priorityDefault(), "priority_default");
            s.u32(f.keepalive(), "keepalive");
            s.str(f.prefix(), "prefix");
        } else if (frame instanceof Frame.Request f) {
            s.tid(f.transId(), "trans_id");
            s.u32(f.timeout(), "timeout");
            s.i8(f.priority(), "priority");
            s.u8(f.flags(), "flags");
            s.u64(f.source());
            s.str(f.name(), "name");
            s.str(f.pattern(), "pattern");
            s.bytes(f.requestInfo());
            s.bytes(f.request());
        } else if (frame instanceof Frame.Response f) {
            writeAnswer(s, f.transId(), f.status(), f.responseInfo(), f.response());
        } else if (frame instanceof Frame.Reply f) {
            s.u32(f.reqId(), "req_id");
            s.u16(f.status(), "status");
            s.u32(f.value(), "value");
            s.str(f.message(), "message");
        } else if (frame instanceof Frame.McastSent f) {
            s.tid(f.transId(), "trans_id");
            s.u32(f.transIds().size(), "count");
            for (TransId id : f.transIds()) {
                s.tid(id, "trans_ids");
            }
        } else if (frame instanceof Frame.Terminate f) {
            s.u32(f.timeout(), "timeout");
        } else if (frame instanceof Frame.Error f) {
            s.u16(f.status(), "status");
            s.str(f.message(), "message");
        } else {
            throw new IllegalArgumentException("unknown frame " + frame);
        }
    }

    /** RETURN and RESPONSE share this layout. */
    private static void writeAnswer(FieldSink s, TransId id, int status, byte[] info, byte[] body) {
        s.tid(id, "trans_id");
        s.u16(status, "status");
        s.bytes(info);
        s.bytes(body);
    }
}
