package dev.cumulo;

/** Status codes of the wire protocol (PROTOCOL.md section 2.3). */
public enum Status {
    OK(0),
    TIMEOUT(1),
    NO_SERVICE(2),
    QUEUE_FULL(3),
    CRASHED(4),
    MALFORMED(5),
    SHUTTING_DOWN(6),
    SERVICE_ERROR(7),
    TOO_LARGE(8),
    INVALID_ARGUMENT(9),
    UNSUPPORTED_VERSION(10),
    UNAUTHORIZED(11),
    PROTOCOL(12),
    UNAVAILABLE(13),
    /** A code this SDK does not know; receivers must accept it as an error. */
    UNKNOWN(-1);

    private static final Status[] BY_CODE = {
        OK, TIMEOUT, NO_SERVICE, QUEUE_FULL, CRASHED, MALFORMED, SHUTTING_DOWN,
        SERVICE_ERROR, TOO_LARGE, INVALID_ARGUMENT, UNSUPPORTED_VERSION, UNAUTHORIZED, PROTOCOL,
        UNAVAILABLE,
    };

    private final int code;

    Status(int code) {
        this.code = code;
    }

    /** The code on the wire; -1 for {@link #UNKNOWN}. */
    public int code() {
        return code;
    }

    /** The status named by a wire code, or {@link #UNKNOWN}. */
    public static Status fromCode(int code) {
        return code >= 0 && code < BY_CODE.length ? BY_CODE[code] : UNKNOWN;
    }
}
