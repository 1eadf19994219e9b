package dev.cumulo;

/**
 * A request delivered to a handler. The byte arrays are the SDK's own copies from the wire and are
 * not copied again; a handler should not modify them.
 */
public final class Request {
    private final Frame.Request frame;
    private boolean forwarded;

    Request(Frame.Request frame) {
        this.frame = frame;
    }

    /** The name the sender used. */
    public String name() {
        return frame.name();
    }

    /** The full pattern (prefix included) that matched the name. */
    public String pattern() {
        return frame.pattern();
    }

    public byte[] requestInfo() {
        return frame.requestInfo();
    }

    /** The payload. */
    public byte[] request() {
        return frame.request();
    }

    /** Milliseconds left for this request. */
    public long timeout() {
        return frame.timeout();
    }

    public int priority() {
        return frame.priority();
    }

    public TransId transId() {
        return frame.transId();
    }

    /** Who sent it: {@code node_id << 32 | instance_id}, 0 for the core itself. */
    public long source() {
        return frame.source();
    }

    /** Sent with send_sync. */
    public boolean isSync() {
        return (frame.flags() & Frame.Request.SYNC) != 0;
    }

    /** A multicast copy. */
    public boolean isMcast() {
        return (frame.flags() & Frame.Request.MCAST) != 0;
    }

    boolean forwarded() {
        return forwarded;
    }

    void markForwarded() {
        forwarded = true;
    }

    @Override
    public String toString() {
        return "Request[" + transId() + " " + name() + "]";
    }
}
