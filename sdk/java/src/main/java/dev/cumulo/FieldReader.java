package dev.cumulo;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** Reads the fields of one frame body, refusing to read past its end. */
final class FieldReader {
    private final ByteBuffer body;
    private final FrameType type;

    FieldReader(ByteBuffer body, FrameType type) {
        this.body = body.slice().order(ByteOrder.LITTLE_ENDIAN);
        this.type = type;
    }

    int u8() throws CumuloException {
        need(1, "u8");
        return body.get() & 0xff;
    }

    int i8() throws CumuloException {
        need(1, "i8");
        return body.get();
    }

    int u16() throws CumuloException {
        need(2, "u16");
        return body.getShort() & 0xffff;
    }

    long u32() throws CumuloException {
        need(4, "u32");
        return body.getInt() & 0xffffffffL;
    }

    long u64() throws CumuloException {
        need(8, "u64");
        return body.getLong();
    }

    TransId tid() throws CumuloException {
        need(TransId.SIZE, "trans_id");
        byte[] b = new byte[TransId.SIZE];
        body.get(b);
        return TransId.wrap(b);
    }

    String str() throws CumuloException {
        int n = u16();
        need(n, "str");
        ByteBuffer utf8 = body.slice(body.position(), n);
        body.position(body.position() + n);
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(utf8)
                    .toString();
        } catch (CharacterCodingException e) {
            throw malformed("a str field is not valid UTF-8");
        }
    }

    byte[] bytes() throws CumuloException {
        long n = u32();
        need(n, "bytes");
        byte[] b = new byte[(int) n];
        body.get(b);
        return b;
    }

    /** The body must be consumed exactly. */
    void end() throws CumuloException {
        if (body.hasRemaining()) {
            throw malformed(body.remaining() + " trailing bytes");
        }
    }

    private void need(long n, String what) throws CumuloException {
        if (body.remaining() < n) {
            throw malformed(what + " of " + n + " bytes runs past the end of the frame");
        }
    }

    private CumuloException malformed(String why) {
        return new CumuloException(Status.MALFORMED, type + ": " + why);
    }
}
