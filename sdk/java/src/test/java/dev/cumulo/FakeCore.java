package dev.cumulo;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/** The core's side of the protocol, scripted by a test, listening on a real socket. */
final class FakeCore implements AutoCloseable {
    private final ServerSocketChannel server;
    private final String address;
    private final Path dir;

    private FakeCore(ServerSocketChannel server, String address, Path dir) {
        this.server = server;
        this.address = address;
        this.dir = dir;
    }

    static FakeCore unix() throws IOException {
        Path dir = Files.createTempDirectory("cumulo-java-test");
        Path socket = dir.resolve("core.sock");
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(socket));
        return new FakeCore(server, socket.toString(), dir);
    }

    static FakeCore tcp() throws IOException {
        ServerSocketChannel server = ServerSocketChannel.open();
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
        return new FakeCore(server, "tcp://127.0.0.1:" + port, null);
    }

    /** What a client puts in CUMULO_SOCKET. */
    String address() {
        return address;
    }

    Peer accept() throws IOException {
        return new Peer(server.accept());
    }

    @Override
    public void close() throws IOException {
        server.close();
        if (dir != null) {
            Files.deleteIfExists(dir.resolve("core.sock"));
            Files.deleteIfExists(dir);
        }
    }
}
