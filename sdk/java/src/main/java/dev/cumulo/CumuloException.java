package dev.cumulo;

import java.io.IOException;

/**
 * An error with a protocol status: a failed request (TIMEOUT, NO_SERVICE, ...), an ERROR from the
 * core, or a frame this SDK refused (MALFORMED, TOO_LARGE).
 */
public class CumuloException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int code;
    private final String reason;
    private final transient TransId transId;

    public CumuloException(Status status, String reason) {
        this(status.code(), reason, null);
    }

    public CumuloException(Status status, String reason, TransId transId) {
        this(status.code(), reason, transId);
    }

    public CumuloException(int code, String reason, TransId transId) {
        super(Status.fromCode(code) + " (" + code + "): " + reason);
        this.code = code;
        this.reason = reason;
        this.transId = transId;
    }

    /** The status by name; {@link Status#UNKNOWN} for a code this SDK does not know. */
    public Status status() {
        return Status.fromCode(code);
    }

    /** The status code as it came on the wire. */
    public int code() {
        return code;
    }

    /** The explanation from the core or the service, without the status prefix. */
    public String reason() {
        return reason;
    }

    /** The request this error answers, or null for errors not tied to one request. */
    public TransId transId() {
        return transId;
    }
}
