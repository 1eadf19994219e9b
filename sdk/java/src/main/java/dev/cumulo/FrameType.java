package dev.cumulo;

/** Frame type codes (PROTOCOL.md section 4). */
public enum FrameType {
    HELLO(0x01),
    SUBSCRIBE(0x02),
    UNSUBSCRIBE(0x03),
    SUBSCRIBE_COUNT(0x04),
    SEND_ASYNC(0x10),
    SEND_SYNC(0x11),
    MCAST_ASYNC(0x12),
    RETURN(0x20),
    FORWARD(0x21),
    PING(0x30),
    PONG(0x31),
    GOODBYE(0x32),
    WELCOME(0x81),
    REQUEST(0x82),
    RESPONSE(0x83),
    REPLY(0x84),
    MCAST_SENT(0x85),
    TERMINATE(0x86),
    ERROR(0x87);

    private static final FrameType[] BY_CODE = new FrameType[256];

    static {
        for (FrameType t : values()) {
            BY_CODE[t.code] = t;
        }
    }

    private final int code;

    FrameType(int code) {
        this.code = code;
    }

    public int code() {
        return code;
    }

    /** The type with this code, or null if the protocol has none. */
    public static FrameType fromCode(int code) {
        return code >= 0 && code < 256 ? BY_CODE[code] : null;
    }
}
