package dev.cumulo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLServerSocket;
import javax.net.ssl.SSLSocket;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * TLS to a fake core that speaks JSSE, with the certificates of tests/tls/make_certs.sh (skipped
 * where the openssl CLI is missing), and the checks of the TLS settings that need no certificate.
 */
@Timeout(30)
class TlsTest {
    private static Path certs;

    @BeforeAll
    static void makeCerts() throws Exception {
        Path script = Path.of("../../tests/tls/make_certs.sh").toAbsolutePath();
        certs = Files.createTempDirectory("cumulo-java-tls");
        boolean made;
        try {
            Process p = new ProcessBuilder("bash", script.toString(), certs.toString())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            made = p.waitFor() == 0;
        } catch (IOException e) {
            made = false;
        }
        if (!made) {
            certs = null;
        }
    }

    @AfterAll
    static void removeCerts() throws IOException {
        if (certs != null) {
            try (Stream<Path> files = Files.walk(certs)) {
                files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    private static String cert(String name) {
        assumeTrue(certs != null, "tests/tls/make_certs.sh could not run (openssl missing?)");
        return certs.resolve(name).toString();
    }

    private static Options options(String socket) {
        return Options.unmanaged(socket, "/test/");
    }

    @Test
    void aCertificateWithoutItsKeyOrTheReverseIsRefused() {
        Options opts = options("tcp://127.0.0.1:1");
        for (Map<String, String> env : java.util.List.of(
                Map.of("CUMULO_TLS_CA", "ca.pem", "CUMULO_TLS_CERT", "client.pem"),
                Map.of("CUMULO_TLS_CA", "ca.pem", "CUMULO_TLS_KEY", "client.key"))) {
            CumuloException e = assertThrows(CumuloException.class, () -> Tls.context(opts, env));
            assertEquals(Status.INVALID_ARGUMENT, e.status());
            assertTrue(e.reason().contains("go together"), e.reason());
        }
        CumuloException e = assertThrows(CumuloException.class,
                () -> Tls.context(opts.withTls("ca.pem", "client.pem", null), Map.of()));
        assertTrue(e.reason().contains("only the certificate"), e.reason());
    }

    @Test
    void aMissingCaFileIsAClearError() {
        CumuloException e = assertThrows(CumuloException.class,
                () -> Api.connect(options("tcp://127.0.0.1:1"), Map.of("CUMULO_TLS_CA", "/nonexistent/ca.pem")));
        assertEquals(Status.INVALID_ARGUMENT, e.status());
        assertTrue(e.reason().contains("/nonexistent/ca.pem"), e.reason());
    }

    @Test
    void withoutACaOrOverAUnixSocketTheConnectionIsPlain() throws IOException {
        assertNull(Tls.context(options("tcp://127.0.0.1:1"), Map.of()));
        assertNull(Tls.context(options("/tmp/core.sock"), Map.of("CUMULO_TLS_CA", "/nonexistent/ca.pem")));
    }

    @Test
    void theCoreIsVerifiedAndTheSessionRunsOverTls() throws Exception {
        try (TlsCore core = new TlsCore(false)) {
            CompletableFuture<Void> served = core.serveOneSession(true);
            // By IP address (the certificate's IP:127.0.0.1), the CA from the environment.
            try (Api api = Api.connect(options(core.address()), Map.of("CUMULO_TLS_CA", cert("ca.pem")))) {
                // The core answers after more than one TLS read's wait: the read must carry on.
                assertEquals(3, api.subscribeCount("a"));
            }
            served.get();
        }
    }

    @Test
    void theHostNameIsCheckedAndTheOptionWinsOverTheEnvironment() throws Exception {
        try (TlsCore core = new TlsCore(false)) {
            CompletableFuture<Void> served = core.serveOneSession(false);
            String byName = core.address().replace("127.0.0.1", "localhost");
            Options opts = options(byName).withTls(cert("ca.pem"), null, null);
            try (Api api = Api.connect(opts, Map.of("CUMULO_TLS_CA", cert("other-ca.pem")))) {
                assertEquals(3, api.subscribeCount("a"));
            }
            served.get();
        }
    }

    @Test
    void anotherCaIsRefusedWithTheReason() throws Exception {
        try (TlsCore core = new TlsCore(false)) {
            core.serveOneSession(false);
            SSLException e = assertThrows(SSLException.class,
                    () -> Api.connect(options(core.address()), Map.of("CUMULO_TLS_CA", cert("other-ca.pem"))));
            assertTrue(e.getMessage().contains("PKIX") || e.getMessage().contains("certification path"), e.getMessage());
        }
    }

    @Test
    void aCoreThatRequiresACertificateGetsOneOrRefusesTheConnection() throws Exception {
        try (TlsCore core = new TlsCore(true)) {
            CompletableFuture<Void> served = core.serveOneSession(false);
            Map<String, String> env = Map.of("CUMULO_TLS_CA", cert("ca.pem"),
                    "CUMULO_TLS_CERT", cert("client.pem"), "CUMULO_TLS_KEY", cert("client.key"));
            try (Api api = Api.connect(options(core.address()), env)) {
                assertEquals(3, api.subscribeCount("a"));
            }
            served.get();
            core.serveOneSession(false);
            // TLS 1.3 refuses after the client's side of the handshake: the error comes while
            // waiting for WELCOME, still from connect.
            assertThrows(SSLException.class,
                    () -> Api.connect(options(core.address()), Map.of("CUMULO_TLS_CA", cert("ca.pem"))));
        }
    }

    /** A core's TLS listener on 127.0.0.1 with server.pem; {@code requireClient}: mTLS against ca.pem. */
    private static final class TlsCore implements AutoCloseable {
        private final SSLServerSocket server;

        TlsCore(boolean requireClient) throws Exception {
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(Tls.keyManagers(cert("server.pem"), cert("server.key")),
                    requireClient ? Tls.trustManagers(cert("ca.pem")) : null, null);
            server = (SSLServerSocket) context.getServerSocketFactory().createServerSocket(0, 1,
                    java.net.InetAddress.getLoopbackAddress());
            server.setNeedClientAuth(requireClient);
        }

        String address() {
            return "tcp://127.0.0.1:" + server.getLocalPort();
        }

        /** Accepts one connection: WELCOME to its HELLO, then 3 to one SUBSCRIBE_COUNT. */
        CompletableFuture<Void> serveOneSession(boolean slowReply) {
            return CompletableFuture.runAsync(() -> {
                try (SSLSocket s = (SSLSocket) server.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    assertInstanceOf(Frame.Hello.class, read(in));
                    out.write(Codec.encode(Peer.welcome(1 << 20, "/test/")));
                    out.flush();
                    Frame.Control control = assertInstanceOf(Frame.Control.class, read(in));
                    assertEquals("a", control.pattern());
                    if (slowReply) {
                        Thread.sleep(3L * Connection.TLS_STOP_POLL_MS);
                    }
                    out.write(Codec.encode(new Frame.Reply(control.reqId(), 0, 3, "")));
                    out.flush();
                    assertEquals(FrameType.GOODBYE, read(in).type());
                } catch (IOException e) {
                    // a refused handshake ends here
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }

        private static Frame read(InputStream in) throws IOException {
            DataInputStream data = new DataInputStream(in);
            byte[] header = new byte[4];
            data.readFully(header);
            long length = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN).getInt() & 0xffffffffL;
            byte[] rest = new byte[Codec.checkLength(length, 1 << 24)];
            data.readFully(rest);
            ByteBuffer body = ByteBuffer.wrap(rest).order(ByteOrder.LITTLE_ENDIAN);
            return Codec.decodeBody(body.get() & 0xff, body);
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }
}
