package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.lang.reflect.RecordComponent;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Every vector of proto/vectors: frames decoded and compared field by field, fields encoded and
 * compared byte for byte, invalid frames rejected with the named status.
 */
class VectorTest {
    /** Limit for valid vectors; invalid ones assume 1024 (PROTOCOL.md section 8). */
    private static final long VALID_LIMIT = 1 << 24;
    private static final long INVALID_LIMIT = 1024;
    private static final HexFormat HEX = HexFormat.of();
    private static final ObjectMapper JSON = new ObjectMapper();

    private static final Map<FrameType, Class<? extends Frame>> LAYOUTS = new TreeMap<>(Map.ofEntries(
            Map.entry(FrameType.HELLO, Frame.Hello.class),
            Map.entry(FrameType.SUBSCRIBE, Frame.Control.class),
            Map.entry(FrameType.UNSUBSCRIBE, Frame.Control.class),
            Map.entry(FrameType.SUBSCRIBE_COUNT, Frame.Control.class),
            Map.entry(FrameType.SEND_ASYNC, Frame.Send.class),
            Map.entry(FrameType.SEND_SYNC, Frame.Send.class),
            Map.entry(FrameType.MCAST_ASYNC, Frame.Send.class),
            Map.entry(FrameType.FORWARD, Frame.Send.class),
            Map.entry(FrameType.RETURN, Frame.Return.class),
            Map.entry(FrameType.PING, Frame.Ping.class),
            Map.entry(FrameType.PONG, Frame.Pong.class),
            Map.entry(FrameType.GOODBYE, Frame.Goodbye.class),
            Map.entry(FrameType.WELCOME, Frame.Welcome.class),
            Map.entry(FrameType.REQUEST, Frame.Request.class),
            Map.entry(FrameType.RESPONSE, Frame.Response.class),
            Map.entry(FrameType.REPLY, Frame.Reply.class),
            Map.entry(FrameType.MCAST_SENT, Frame.McastSent.class),
            Map.entry(FrameType.TERMINATE, Frame.Terminate.class),
            Map.entry(FrameType.ERROR, Frame.Error.class)));

    private static Path vectorDir() {
        String dir = System.getProperty("cumulo.vectors");
        assertNotNull(dir, "system property cumulo.vectors (set in pom.xml) names the vector folder");
        return Path.of(dir);
    }

    private static List<Path> vectorFiles() throws IOException {
        try (Stream<Path> files = Files.list(vectorDir())) {
            List<Path> json = files.filter(p -> p.toString().endsWith(".json")).sorted().toList();
            assertFalse(json.isEmpty(), "no vectors in " + vectorDir());
            return json;
        }
    }

    @TestFactory
    List<DynamicTest> vectors() throws IOException {
        List<DynamicTest> tests = new ArrayList<>();
        for (Path file : vectorFiles()) {
            JsonNode root = JSON.readTree(file.toFile());
            String family = root.get("family").asText();
            boolean kv = family.equals("kv");
            for (JsonNode vector : root.get("vectors")) {
                String name = family + "/" + vector.get("name").asText();
                tests.add(dynamicTest(name, () -> {
                    if (kv) {
                        checkKv(vector);
                    } else {
                        checkFrame(vector);
                    }
                }));
            }
            for (JsonNode invalid : root.path("invalid")) {
                String name = family + "/invalid/" + invalid.get("name").asText();
                tests.add(dynamicTest(name, () -> {
                    byte[] bytes = HEX.parseHex(invalid.get("hex").asText());
                    CumuloException e = assertThrows(CumuloException.class,
                            () -> {
                                if (kv) {
                                    Info.parse(bytes);
                                } else {
                                    Codec.decode(bytes, INVALID_LIMIT);
                                }
                            });
                    assertEquals(invalid.get("error").asText(), e.status().name(), e.getMessage());
                }));
            }
        }
        return tests;
    }

    private static void checkFrame(JsonNode vector) throws Exception {
        FrameType type = FrameType.valueOf(vector.get("type").asText());
        byte[] wire = HEX.parseHex(vector.get("hex").asText());
        Map<String, Object> expected = fromJson(vector.get("fields"));

        Frame decoded = Codec.decode(wire, VALID_LIMIT);
        assertEquals(type, decoded.type());
        assertEquals(expected, fieldsOf(decoded));

        Frame built = build(type, vector.get("fields"));
        assertEquals(HEX.formatHex(wire), HEX.formatHex(Codec.encode(built)));
    }

    private static void checkKv(JsonNode vector) throws CumuloException {
        byte[] wire = HEX.parseHex(vector.get("hex").asText());
        List<Map.Entry<String, String>> pairs = new ArrayList<>();
        for (JsonNode pair : vector.get("pairs")) {
            pairs.add(Map.entry(pair.get(0).asText(), pair.get(1).asText()));
        }
        assertEquals(pairs, Info.parse(wire));
        assertArrayEquals(wire, Info.encode(pairs));
    }

    /** A record's fields under their protocol names, with bytes and ids as hex and integers as longs. */
    private static Map<String, Object> fieldsOf(Frame frame) throws ReflectiveOperationException {
        Map<String, Object> fields = new LinkedHashMap<>();
        for (RecordComponent component : frame.getClass().getRecordComponents()) {
            if (component.getName().equals("type")) {
                continue;
            }
            fields.put(snakeCase(component.getName()), normalise(component.getAccessor().invoke(frame)));
        }
        return fields;
    }

    private static Object normalise(Object value) {
        if (value instanceof byte[] bytes) {
            return HEX.formatHex(bytes);
        }
        if (value instanceof TransId id) {
            return id.toString();
        }
        if (value instanceof Integer i) {
            return i.longValue();
        }
        if (value instanceof List<?> list) {
            return list.stream().map(VectorTest::normalise).toList();
        }
        return value;
    }

    private static Map<String, Object> fromJson(JsonNode fields) {
        Map<String, Object> map = new LinkedHashMap<>();
        fields.fields().forEachRemaining(e -> map.put(e.getKey(), jsonValue(e.getValue())));
        return map;
    }

    private static Object jsonValue(JsonNode node) {
        if (node.isIntegralNumber()) {
            return node.bigIntegerValue().longValue(); // u64 above 2^63 keeps its bits
        }
        if (node.isArray()) {
            List<Object> list = new ArrayList<>();
            node.forEach(n -> list.add(jsonValue(n)));
            return list;
        }
        return node.asText();
    }

    /** The frame named by the vector, from its JSON fields, through the record's canonical constructor. */
    private static Frame build(FrameType type, JsonNode fields) throws ReflectiveOperationException {
        Class<? extends Frame> layout = LAYOUTS.get(type);
        RecordComponent[] components = layout.getRecordComponents();
        Class<?>[] types = new Class<?>[components.length];
        Object[] args = new Object[components.length];
        for (int i = 0; i < components.length; i++) {
            RecordComponent c = components[i];
            types[i] = c.getType();
            if (c.getName().equals("type")) {
                args[i] = type;
                continue;
            }
            JsonNode value = fields.get(snakeCase(c.getName()));
            assertNotNull(value, "vector lacks field " + snakeCase(c.getName()));
            args[i] = argument(c.getType(), value);
        }
        return layout.getDeclaredConstructor(types).newInstance(args);
    }

    private static Object argument(Class<?> type, JsonNode value) {
        if (type == long.class) {
            return value.bigIntegerValue().longValue();
        }
        if (type == int.class) {
            return value.intValue();
        }
        if (type == String.class) {
            return value.asText();
        }
        if (type == byte[].class) {
            return HEX.parseHex(value.asText());
        }
        if (type == TransId.class) {
            return TransId.fromHex(value.asText());
        }
        if (type == List.class) {
            List<TransId> ids = new ArrayList<>();
            value.forEach(v -> ids.add(TransId.fromHex(v.asText())));
            return ids;
        }
        throw new IllegalArgumentException("no JSON mapping for " + type);
    }

    private static String snakeCase(String camel) {
        return camel.replaceAll("([A-Z])", "_$1").toLowerCase();
    }
}
