package dev.cumulo;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The key/value encoding of request_info and response_info (PROTOCOL.md section 5):
 * {@code key\0value\0...}, keys may repeat, order is kept.
 */
public final class Info {
    private Info() {
    }

    /** Encodes pairs in their order. Keys and values must not contain NUL. */
    public static byte[] encode(List<? extends Map.Entry<String, String>> pairs) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (Map.Entry<String, String> pair : pairs) {
            writeField(out, pair.getKey());
            writeField(out, pair.getValue());
        }
        return out.toByteArray();
    }

    /** Encodes a mapping in its iteration order (use a LinkedHashMap to choose it). */
    public static byte[] encode(Map<String, String> mapping) {
        return encode(List.copyOf(mapping.entrySet()));
    }

    /** Encodes alternating keys and values: {@code encode("status", "404", "x-a", "b")}. */
    public static byte[] encode(String... keysAndValues) {
        if (keysAndValues.length % 2 != 0) {
            throw new IllegalArgumentException("keys and values must come in pairs");
        }
        List<Map.Entry<String, String>> pairs = new ArrayList<>();
        for (int i = 0; i < keysAndValues.length; i += 2) {
            pairs.add(Map.entry(keysAndValues[i], keysAndValues[i + 1]));
        }
        return encode(pairs);
    }

    /**
     * Parses the pairs, in order. Keys and values are decoded as UTF-8, with invalid sequences
     * replaced (they are bytes by the protocol, UTF-8 only by convention).
     *
     * @throws CumuloException MALFORMED when the buffer does not end with NUL or holds an odd
     *     number of fields
     */
    public static List<Map.Entry<String, String>> parse(byte[] info) throws CumuloException {
        List<Map.Entry<String, String>> pairs = new ArrayList<>();
        if (info.length > 0 && info[info.length - 1] != 0) {
            throw new CumuloException(Status.MALFORMED, "key/value bytes do not end with NUL");
        }
        int start = 0;
        String key = null;
        for (int i = 0; i < info.length; i++) {
            if (info[i] != 0) {
                continue;
            }
            String field = new String(info, start, i - start, StandardCharsets.UTF_8);
            start = i + 1;
            if (key == null) {
                key = field;
            } else {
                pairs.add(Map.entry(key, field));
                key = null;
            }
        }
        if (key != null) {
            throw new CumuloException(Status.MALFORMED, "key '" + key + "' has no value");
        }
        return pairs;
    }

    /** The value of the first pair with this key, or null. */
    public static String first(List<? extends Map.Entry<String, String>> pairs, String key) {
        for (Map.Entry<String, String> pair : pairs) {
            if (pair.getKey().equals(key)) {
                return pair.getValue();
            }
        }
        return null;
    }

    private static void writeField(ByteArrayOutputStream out, String field) {
        if (field.indexOf('\0') >= 0) {
            throw new IllegalArgumentException("keys and values cannot contain NUL: " + field.replace('\0', '?'));
        }
        out.writeBytes(field.getBytes(StandardCharsets.UTF_8));
        out.write(0);
    }
}
