package dev.cumulo;

import java.util.List;
import java.util.Objects;

/**
 * The frames of the wire protocol, one record per layout (PROTOCOL.md section 4). Integer fields
 * keep their wire range: u32 in a {@code long}, u16, u8 and i8 in an {@code int}, u64 in a
 * {@code long} read as unsigned. {@link Codec} turns them into bytes and back.
 */
public sealed interface Frame {
    FrameType type();

    /** 0x01, the instance's first frame. */
    record Hello(int version, long window, long threadIndex, String token, String prefix) implements Frame {
        public FrameType type() {
            return FrameType.HELLO;
        }
    }

    /** SUBSCRIBE, UNSUBSCRIBE and SUBSCRIBE_COUNT, which share one layout. */
    record Control(FrameType type, long reqId, String pattern) implements Frame {
        public Control {
            requireOneOf(type, FrameType.SUBSCRIBE, FrameType.UNSUBSCRIBE, FrameType.SUBSCRIBE_COUNT);
        }
    }

    /** SEND_ASYNC, SEND_SYNC, MCAST_ASYNC and FORWARD, which share one layout. */
    record Send(FrameType type, TransId transId, long timeout, int priority, int flags, String name,
                byte[] requestInfo, byte[] request) implements Frame {
        /** flags bit 0: wait for a subscriber up to the timeout instead of failing with NO_SERVICE. */
        public static final int WAIT_FOR_SERVICE = 1;

        public Send {
            requireOneOf(type, FrameType.SEND_ASYNC, FrameType.SEND_SYNC, FrameType.MCAST_ASYNC, FrameType.FORWARD);
        }
    }

    record Return(TransId transId, int status, byte[] responseInfo, byte[] response) implements Frame {
        public FrameType type() {
            return FrameType.RETURN;
        }
    }

    record Ping(long nonce) implements Frame {
        public FrameType type() {
            return FrameType.PING;
        }
    }

    record Pong(long nonce) implements Frame {
        public FrameType type() {
            return FrameType.PONG;
        }
    }

    record Goodbye() implements Frame {
        public FrameType type() {
            return FrameType.GOODBYE;
        }
    }

    record Welcome(int version, long nodeId, long instanceId, long processIndex, long processCount,
                   long threadCount, long window, long maxFrame, long timeoutAsync, long timeoutSync,
                   long timeoutTerminate, int priorityDefault, long keepalive, String prefix) implements Frame {
        public FrameType type() {
            return FrameType.WELCOME;
        }
    }

    record Request(TransId transId, long timeout, int priority, int flags, long source, String name,
                   String pattern, byte[] requestInfo, byte[] request) implements Frame {
        /** flags bit 0: sent with send_sync. */
        public static final int SYNC = 1;
        /** flags bit 1: a multicast copy. */
        public static final int MCAST = 2;

        public FrameType type() {
            return FrameType.REQUEST;
        }
    }

    record Response(TransId transId, int status, byte[] responseInfo, byte[] response) implements Frame {
        public FrameType type() {
            return FrameType.RESPONSE;
        }
    }

    record Reply(long reqId, int status, long value, String message) implements Frame {
        public FrameType type() {
            return FrameType.REPLY;
        }
    }

    /** The count field is implied by the list's size. */
    record McastSent(TransId transId, List<TransId> transIds) implements Frame {
        public McastSent {
            transIds = List.copyOf(transIds);
        }

        public FrameType type() {
            return FrameType.MCAST_SENT;
        }
    }

    record Terminate(long timeout) implements Frame {
        public FrameType type() {
            return FrameType.TERMINATE;
        }
    }

    record Error(int status, String message) implements Frame {
        public FrameType type() {
            return FrameType.ERROR;
        }
    }

    private static void requireOneOf(FrameType type, FrameType... allowed) {
        Objects.requireNonNull(type, "type");
        for (FrameType t : allowed) {
            if (t == type) {
                return;
            }
        }
        throw new IllegalArgumentException(type + " does not have this layout");
    }
}
