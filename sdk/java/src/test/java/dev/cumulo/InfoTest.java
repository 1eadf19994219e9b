package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class InfoTest {
    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void encodesAlternatingKeysAndValuesInOrder() {
        assertArrayEquals(bytes("status\u0000404\u0000x-a\u0000\u0000"), Info.encode("status", "404", "x-a", ""));
    }

    @Test
    void encodesAMappingInItsIterationOrder() {
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put("b", "2");
        headers.put("a", "1");
        assertArrayEquals(bytes("b\u00002\u0000a\u00001\u0000"), Info.encode(headers));
    }

    @Test
    void emptyIsNoPairs() throws CumuloException {
        assertEquals(List.of(), Info.parse(new byte[0]));
        assertArrayEquals(new byte[0], Info.encode(List.of()));
    }

    @Test
    void keepsRepeatedKeysAndFindsTheFirst() throws CumuloException {
        List<Map.Entry<String, String>> pairs = Info.parse(bytes("k\u00001\u0000k\u00002\u0000"));
        assertEquals(List.of(Map.entry("k", "1"), Map.entry("k", "2")), pairs);
        assertEquals("1", Info.first(pairs, "k"));
        assertNull(Info.first(pairs, "missing"));
    }

    @Test
    void roundTripsEmptyKeysAndValues() throws CumuloException {
        List<Map.Entry<String, String>> pairs = List.of(Map.entry("", ""), Map.entry("x", ""));
        assertEquals(pairs, Info.parse(Info.encode(pairs)));
    }

    @Test
    void rejectsNulInsideAKeyOrValue() {
        assertThrows(IllegalArgumentException.class, () -> Info.encode("a\u0000b", "1"));
        assertThrows(IllegalArgumentException.class, () -> Info.encode("a", "1\u0000"));
        assertThrows(IllegalArgumentException.class, () -> Info.encode("only-a-key"));
    }

    @Test
    void rejectsMalformedBuffers() {
        for (String malformed : new String[] {"\u0000", "a", "a\u0000b", "a\u0000b\u0000c\u0000", "\u0000\u0000\u0000"}) {
            CumuloException e = assertThrows(CumuloException.class, () -> Info.parse(bytes(malformed)));
            assertEquals(Status.MALFORMED, e.status());
        }
    }
}
