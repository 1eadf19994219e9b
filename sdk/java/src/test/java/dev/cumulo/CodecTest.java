package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Codec and trans_id behaviour beyond the shared vectors. */
class CodecTest {
    private static final TransId ID = TransId.of(1, 2, 3);

    @Test
    void refusesValuesOutsideTheirWireRange() {
        assertThrows(IllegalArgumentException.class,
                () -> Codec.encode(new Frame.Send(FrameType.SEND_ASYNC, ID, 1L << 32, 0, 0, "/a", new byte[0], new byte[0])));
        assertThrows(IllegalArgumentException.class,
                () -> Codec.encode(new Frame.Send(FrameType.SEND_ASYNC, ID, 0, 128, 0, "/a", new byte[0], new byte[0])));
        assertThrows(IllegalArgumentException.class,
                () -> Codec.encode(new Frame.Control(FrameType.SUBSCRIBE, -1, "a")));
        assertThrows(IllegalArgumentException.class,
                () -> Codec.encode(new Frame.Control(FrameType.SUBSCRIBE, 1, "x".repeat(0x10000))));
    }

    @Test
    void layoutsAreTiedToTheirTypes() {
        assertThrows(IllegalArgumentException.class, () -> new Frame.Control(FrameType.PING, 1, "a"));
        assertThrows(IllegalArgumentException.class,
                () -> new Frame.Send(FrameType.RETURN, ID, 0, 0, 0, "/a", new byte[0], new byte[0]));
    }

    @Test
    void hugeCountInAShortFrameIsMalformedWithoutAllocating() {
        ByteBuffer frame = ByteBuffer.allocate(4 + 1 + 16 + 4 + 16).order(ByteOrder.LITTLE_ENDIAN);
        frame.putInt(1 + 16 + 4 + 16).put((byte) 0x85).put(ID.toBytes()).putInt(-1).put(ID.toBytes());
        CumuloException e = assertThrows(CumuloException.class, () -> Codec.decode(frame.array(), 1024));
        assertEquals(Status.MALFORMED, e.status());
    }

    @Test
    void bytesLengthNearFourGigabytesIsMalformed() {
        ByteBuffer frame = ByteBuffer.allocate(4 + 1 + 16 + 2 + 4).order(ByteOrder.LITTLE_ENDIAN);
        frame.putInt(1 + 16 + 2 + 4).put((byte) 0x20).put(ID.toBytes()).putShort((short) 0).putInt(-2);
        CumuloException e = assertThrows(CumuloException.class, () -> Codec.decode(frame.array(), 1024));
        assertEquals(Status.MALFORMED, e.status());
    }

    @Test
    void truncatedFramesAreMalformed() {
        byte[] ping = Codec.encode(new Frame.Ping(5));
        for (int cut = 0; cut < ping.length; cut++) {
            byte[] shorter = java.util.Arrays.copyOf(ping, cut);
            CumuloException e = assertThrows(CumuloException.class, () -> Codec.decode(shorter, 1024));
            assertEquals(Status.MALFORMED, e.status());
        }
    }

    @Test
    void mcastSentRoundTrips() throws CumuloException {
        Frame.McastSent sent = new Frame.McastSent(ID, List.of(TransId.of(5, 2, 0), TransId.of(6, 2, 0)));
        Frame.McastSent back = (Frame.McastSent) Codec.decode(Codec.encode(sent), 1024);
        assertEquals(sent, back);
    }

    @Test
    void transIdFieldsAreBigEndianAndOrderedByTime() {
        TransId early = TransId.of(0x0102030405060708L, 0xfffffffeL, 9);
        assertEquals("0102030405060708fffffffe00000009", early.toString());
        assertEquals(0x0102030405060708L, early.nanos());
        assertEquals(0xfffffffeL, early.nodeId());
        assertEquals(9, early.instanceId());
        assertTrue(early.compareTo(TransId.of(0x0102030405060709L, 0, 0)) < 0);
        // Unsigned comparison: a high first byte is later, not negative.
        assertTrue(TransId.of(0x80L << 56, 0, 0).compareTo(early) > 0);
        assertEquals(early, TransId.fromHex(early.toString()));
    }

    @Test
    void generatedIdsStrictlyIncreaseAndNameTheInstance() {
        TransIdGenerator generator = new TransIdGenerator(4, 11);
        TransId previous = generator.next();
        for (int i = 0; i < 10_000; i++) {
            TransId next = generator.next();
            assertTrue(next.compareTo(previous) > 0, "not increasing: " + previous + " then " + next);
            assertEquals(4, next.nodeId());
            assertEquals(11, next.instanceId());
            previous = next;
        }
    }

    @Test
    void unknownStatusCodesAreKeptAsUnknown() {
        CumuloException e = new CumuloException(99, "new in a later version", null);
        assertEquals(Status.UNKNOWN, e.status());
        assertEquals(99, e.code());
        assertEquals(Status.SERVICE_ERROR, Status.fromCode(7));
    }

    @Test
    void everyStatusOfTheProtocolRoundTripsItsCode() {
        for (Status s : Status.values()) {
            if (s != Status.UNKNOWN) {
                assertEquals(s, Status.fromCode(s.code()));
            }
        }
        assertEquals(Status.UNAVAILABLE, Status.fromCode(13));
        assertEquals(13, Status.UNAVAILABLE.code());
        assertEquals(Status.UNKNOWN, Status.fromCode(14));
    }
}
