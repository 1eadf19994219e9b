package dev.cumulo;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The http_req example run as a real process (java launching its source file against the SDK's
 * classes), served requests by a fake core on each of its two connections.
 */
@Timeout(90)
class ExampleTest {
    private static final String ERROR = "<http_test><error>no value specified</error></http_test>";

    private static String value(String n) {
        return "<http_test><value>" + n + "</value></http_test>";
    }

    /** Request bodies and the answers SDK_GUIDE.md prescribes. */
    private static Map<byte[], String> cases() {
        Map<byte[], String> cases = new LinkedHashMap<>();
        cases.put(Info.encode("value", "42"), value("42"));
        cases.put(Info.encode("value", "+007"), value("7"));
        cases.put(Info.encode("value", "-3"), value("-3"));
        cases.put(Info.encode("value", "9223372036854775807"), value("9223372036854775807"));
        cases.put(Info.encode("value", "-9223372036854775808"), value("-9223372036854775808"));
        cases.put(Info.encode("other", "1", "value", "5"), value("5"));
        cases.put(Info.encode("value", "9223372036854775808"), ERROR);
        cases.put(Info.encode("value", "4.2"), ERROR);
        cases.put(Info.encode("value", " 42"), ERROR);
        cases.put(Info.encode("value", "+"), ERROR);
        cases.put(Info.encode("value", ""), ERROR);
        cases.put(Info.encode("value", "\u0664\u0662"), ERROR);
        cases.put(Info.encode("other", "42"), ERROR);
        cases.put(new byte[0], ERROR);
        cases.put("value\u000042".getBytes(UTF_8), ERROR);
        return cases;
    }

    /** The example as a process (java launching its source against the SDK's classes). */
    private static ProcessBuilder example(FakeCore core, Path log, int threads, String window) throws Exception {
        String source = System.getProperty("cumulo.example");
        assertNotNull(source, "system property cumulo.example (set in pom.xml) names HttpReq.java");
        String sdkClasses = Path.of(Api.class.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "-cp", sdkClasses, source)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile());
        builder.environment().putAll(Map.of("CUMULO_SOCKET", core.address(), "CUMULO_TOKEN", "t0k",
                "CUMULO_THREAD_COUNT", String.valueOf(threads), "CUMULO_PROCESS_INDEX", "0",
                "CUMULO_PROCESS_COUNT", "1", "CUMULO_PREFIX", "/tests/http_req/"));
        if (window == null) {
            builder.environment().remove("HTTP_REQ_WINDOW");
        } else {
            builder.environment().put("HTTP_REQ_WINDOW", window);
        }
        return builder;
    }

    private static Frame.Request request(long n, byte[] body) {
        return new Frame.Request(TransId.of(n, 1, 99), 5000, 0, 0, (1L << 32) | 99,
                "/tests/http_req/java.xml/get", "/tests/http_req/java.xml/get", new byte[0], body);
    }

    /** What a test does with the running example, through the fake core it connects to. */
    private interface Session {
        void run(FakeCore core) throws Exception;
    }

    /**
     * Runs the example against a fake core, hands the core to {@code session}, then expects the
     * example to have exited 0 (the session ends by terminating it); a failure carries its output.
     */
    private static void withExample(int threads, String window, Session session) throws Exception {
        Path log = Files.createTempFile("cumulo-http-req", ".log");
        try (FakeCore core = FakeCore.unix()) {
            Process process = example(core, log, threads, window).start();
            try {
                session.run(core);
                assertTrue(process.waitFor(20, TimeUnit.SECONDS), "the example exits after TERMINATE");
                assertEquals(0, process.exitValue(), Files.readString(log));
            } catch (Throwable t) {
                t.addSuppressed(new AssertionError("example output:\n" + Files.readString(log)));
                throw t;
            } finally {
                process.destroyForcibly();
            }
        } finally {
            Files.deleteIfExists(log);
        }
    }

    @Test
    void answersAsTheGuideSaysOnEveryThread() throws Exception {
        withExample(2, null, core -> {
            List<Peer> peers = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                Peer peer = core.accept();
                peers.add(peer);
                Frame.Hello hello = peer.read(Frame.Hello.class);
                assertEquals("t0k", hello.token());
                assertEquals(1, hello.window(), "without HTTP_REQ_WINDOW the example asks for window 1");
                peer.write(Peer.welcome(1 << 20, "/tests/http_req/"));
                peer.replyTo(FrameType.SUBSCRIBE, "java.xml/get", 0);
            }
            long n = 0;
            for (Map.Entry<byte[], String> c : cases().entrySet()) {
                for (Peer peer : peers) {
                    Frame.Request request = request(++n, c.getKey());
                    peer.write(request);
                    Frame.Return answer = peer.read(Frame.Return.class);
                    assertEquals(request.transId(), answer.transId());
                    assertEquals(0, answer.status());
                    assertArrayEquals(Info.encode("content-type", "text/xml; charset=utf-8"), answer.responseInfo());
                    assertEquals(c.getValue(), new String(answer.response(), UTF_8),
                            "for body " + new String(c.getKey(), UTF_8).replace('\0', '|'));
                }
            }
            for (Peer peer : peers) {
                peer.write(new Frame.Terminate(2000));
            }
            for (Peer peer : peers) {
                peer.read(Frame.Goodbye.class);
                peer.close();
            }
        });
    }

    @Test
    void takesAWindowAndAnswersPipelinedRequestsInOrder() throws Exception {
        withExample(1, "16", core -> {
            try (Peer peer = core.accept()) {
                assertEquals(16, peer.read(Frame.Hello.class).window(), "HTTP_REQ_WINDOW=16 is the HELLO's window");
                peer.write(Peer.welcome(1 << 20, "/tests/http_req/"));
                peer.replyTo(FrameType.SUBSCRIBE, "java.xml/get", 0);
                // Every case at once, as a core granting window 16 may deliver them: answered in order.
                List<Frame.Request> sent = new ArrayList<>();
                List<String> expected = new ArrayList<>();
                for (Map.Entry<byte[], String> c : cases().entrySet()) {
                    sent.add(request(sent.size() + 1, c.getKey()));
                    expected.add(c.getValue());
                }
                peer.write(sent.toArray(new Frame[0]));
                for (int i = 0; i < sent.size(); i++) {
                    Frame.Return answer = peer.read(Frame.Return.class);
                    assertEquals(sent.get(i).transId(), answer.transId(), "answer " + i + " in order");
                    assertEquals(expected.get(i), new String(answer.response(), UTF_8));
                }
                peer.write(new Frame.Terminate(2000));
                peer.read(Frame.Goodbye.class);
            }
        });
    }

    @Test
    void refusesAWindowThatIsNotAPositiveInteger() throws Exception {
        for (String bad : List.of("0", "-4", "x", "16k", "4294967296")) {
            Path log = Files.createTempFile("cumulo-http-req", ".log");
            try (FakeCore core = FakeCore.unix()) {
                Process process = example(core, log, 1, bad).start();
                try {
                    assertTrue(process.waitFor(30, TimeUnit.SECONDS), "HTTP_REQ_WINDOW=" + bad + " stops the example");
                    assertTrue(process.exitValue() != 0, "HTTP_REQ_WINDOW=" + bad + " exits non-zero");
                    String output = Files.readString(log);
                    assertTrue(output.contains("HTTP_REQ_WINDOW='" + bad + "' is not a positive integer"), output);
                } finally {
                    process.destroyForcibly();
                }
            } finally {
                Files.deleteIfExists(log);
            }
        }
    }
}
