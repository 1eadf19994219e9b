package dev.cumulo;

import java.nio.charset.StandardCharsets;

/**
 * An answer: what a handler returns (it becomes the RETURN), and what {@code sendSync} gives back.
 *
 * @param info metadata, usually in the key/value encoding of {@link Info}
 * @param body the payload
 */
public record Response(byte[] info, byte[] body) {
    private static final byte[] NOTHING = new byte[0];

    public Response {
        info = info == null ? NOTHING : info;
        body = body == null ? NOTHING : body;
    }

    public static Response of(byte[] body) {
        return new Response(NOTHING, body);
    }

    public static Response of(byte[] info, byte[] body) {
        return new Response(info, body);
    }

    /** The text as UTF-8, without metadata. */
    public static Response of(String body) {
        return of(body.getBytes(StandardCharsets.UTF_8));
    }

    public static Response empty() {
        return new Response(NOTHING, NOTHING);
    }

    /** The body decoded as UTF-8. */
    public String bodyText() {
        return new String(body, StandardCharsets.UTF_8);
    }
}
