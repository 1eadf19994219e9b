package dev.cumulo;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * Where {@link Codec} writes fields: a counter (to size the frame first) or a buffer. Values out of
 * their wire range are refused, so a frame is never sent with a silently truncated field.
 */
abstract class FieldSink {
    abstract void put(int u8);

    abstract void put(byte[] raw);

    abstract void putU16(int v);

    abstract void putU32(long v);

    abstract void putU64(long v);

    final void u8(int v, String field) {
        check(v >= 0 && v <= 0xff, field, v);
        put(v);
    }

    final void i8(int v, String field) {
        check(v >= -128 && v <= 127, field, v);
        put(v & 0xff);
    }

    final void u16(int v, String field) {
        check(v >= 0 && v <= 0xffff, field, v);
        putU16(v);
    }

    final void u32(long v, String field) {
        check(v >= 0 && v <= 0xffffffffL, field, v);
        putU32(v);
    }

    final void u64(long v) {
        putU64(v);
    }

    final void tid(TransId id, String field) {
        if (id == null) {
            throw new IllegalArgumentException(field + " is missing");
        }
        put(id.rawBytes());
    }

    final void str(String s, String field) {
        byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
        if (utf8.length > 0xffff) {
            throw new IllegalArgumentException(field + " is " + utf8.length + " bytes, over the 65535 of a str");
        }
        putU16(utf8.length);
        put(utf8);
    }

    final void bytes(byte[] b) {
        putU32(b.length);
        put(b);
    }

    private static void check(boolean ok, String field, long v) {
        if (!ok) {
            throw new IllegalArgumentException(field + " = " + v + " is out of its wire range");
        }
    }

    static final class Counter extends FieldSink {
        long size;

        void put(int u8) {
            size += 1;
        }

        void put(byte[] raw) {
            size += raw.length;
        }

        void putU16(int v) {
            size += 2;
        }

        void putU32(long v) {
            size += 4;
        }

        void putU64(long v) {
            size += 8;
        }
    }

    /** Writes into a little-endian buffer that the caller made large enough. */
    static final class Writer extends FieldSink {
        private final ByteBuffer out;

        Writer(ByteBuffer out) {
            this.out = out;
        }

        void put(int u8) {
            out.put((byte) u8);
        }

        void put(byte[] raw) {
            out.put(raw);
        }

        void putU16(int v) {
            out.putShort((short) v);
        }

        void putU32(long v) {
            out.putInt((int) v);
        }

        void putU64(long v) {
            out.putLong(v);
        }
    }
}
