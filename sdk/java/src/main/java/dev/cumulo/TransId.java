package dev.cumulo;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * A request's 16-byte id (PROTOCOL.md 2.2): big-endian nanoseconds, node_id, instance_id, so that
 * comparing the bytes compares the times.
 */
public final class TransId implements Comparable<TransId> {
    public static final int SIZE = 16;

    private final byte[] bytes;

    private TransId(byte[] bytes) {
        this.bytes = bytes;
    }

    /** A trans_id from its 16 bytes (copied). */
    public static TransId of(byte[] bytes) {
        if (bytes.length != SIZE) {
            throw new IllegalArgumentException("a trans_id has 16 bytes, not " + bytes.length);
        }
        return new TransId(bytes.clone());
    }

    public static TransId of(long nanos, long nodeId, long instanceId) {
        byte[] b = new byte[SIZE];
        for (int i = 0; i < 8; i++) {
            b[i] = (byte) (nanos >>> (56 - 8 * i));
        }
        for (int i = 0; i < 4; i++) {
            b[8 + i] = (byte) (nodeId >>> (24 - 8 * i));
            b[12 + i] = (byte) (instanceId >>> (24 - 8 * i));
        }
        return new TransId(b);
    }

    /** A trans_id from 32 hex digits. */
    public static TransId fromHex(String hex) {
        return of(HexFormat.of().parseHex(hex));
    }

    /** Wraps bytes already copied by the caller. */
    static TransId wrap(byte[] bytes) {
        return new TransId(bytes);
    }

    public byte[] toBytes() {
        return bytes.clone();
    }

    byte[] rawBytes() {
        return bytes;
    }

    public long nanos() {
        long v = 0;
        for (int i = 0; i < 8; i++) {
            v = (v << 8) | (bytes[i] & 0xff);
        }
        return v;
    }

    public long nodeId() {
        return readU32(8);
    }

    public long instanceId() {
        return readU32(12);
    }

    private long readU32(int at) {
        long v = 0;
        for (int i = at; i < at + 4; i++) {
            v = (v << 8) | (bytes[i] & 0xff);
        }
        return v;
    }

    @Override
    public int compareTo(TransId other) {
        return Arrays.compareUnsigned(bytes, other.bytes);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TransId t && Arrays.equals(bytes, t.bytes);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(bytes);
    }

    /** The 32 lower-case hex digits. */
    @Override
    public String toString() {
        return HexFormat.of().formatHex(bytes);
    }
}
