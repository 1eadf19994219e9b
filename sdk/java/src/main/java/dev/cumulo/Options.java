package dev.cumulo;

import java.util.Map;

/**
 * How to connect one instance.
 *
 * @param socket a Unix socket path, or {@code tcp://host:port}
 * @param token {@code CUMULO_TOKEN}; empty for an unmanaged instance
 * @param prefix the prefix an unmanaged instance subscribes under; ignored when a token is given
 * @param threadIndex which of the process's connections this is
 * @param window most requests the core may deliver before this instance answers one
 * @param tlsCa a PEM file of the CAs that sign the core's certificate: with a {@code tcp://} socket
 *     the connection is TLS, verified against these CAs only and the socket's host; ignored for a
 *     Unix socket. Null or empty: {@code CUMULO_TLS_CA}
 * @param tlsCert a PEM client certificate for a core that requires one. Null or empty:
 *     {@code CUMULO_TLS_CERT}
 * @param tlsKey the PKCS#8 PEM key of {@code tlsCert}. Null or empty: {@code CUMULO_TLS_KEY}
 */
public record Options(String socket, String token, String prefix, long threadIndex, long window,
                      String tlsCa, String tlsCert, String tlsKey) {
    public Options {
        if (socket == null || socket.isEmpty()) {
            throw new IllegalArgumentException("no socket to connect to");
        }
        token = token == null ? "" : token;
        prefix = prefix == null ? "" : prefix;
        if (token.isEmpty() && !prefix.startsWith("/")) {
            throw new IllegalArgumentException("an unmanaged instance needs a prefix starting with '/', not '" + prefix + "'");
        }
        if (threadIndex < 0 || threadIndex > 0xffffffffL) {
            throw new IllegalArgumentException("thread index " + threadIndex + " is out of range");
        }
        if (window < 1 || window > 0xffffffffL) {
            throw new IllegalArgumentException("window " + window + " is out of range");
        }
        tlsCa = tlsCa == null ? "" : tlsCa;
        tlsCert = tlsCert == null ? "" : tlsCert;
        tlsKey = tlsKey == null ? "" : tlsKey;
    }

    /** Without TLS files of its own: TLS then follows {@code CUMULO_TLS_*}. */
    public Options(String socket, String token, String prefix, long threadIndex, long window) {
        this(socket, token, prefix, threadIndex, window, "", "", "");
    }

    /** A program not started by the core: its own socket and prefix, thread 0, window 1. */
    public static Options unmanaged(String socket, String prefix) {
        return new Options(socket, "", prefix, 0, 1);
    }

    /** From the variables the core sets for the processes it starts. */
    public static Options fromEnv(long threadIndex) {
        return fromEnv(System.getenv(), threadIndex);
    }

    static Options fromEnv(Map<String, String> env, long threadIndex) {
        String socket = env.get("CUMULO_SOCKET");
        if (socket == null || socket.isEmpty()) {
            throw new IllegalStateException("CUMULO_SOCKET is not set: was this process started by cumulo?");
        }
        String token = env.getOrDefault("CUMULO_TOKEN", "");
        // A managed instance's prefix comes from its token; HELLO.prefix stays empty.
        String prefix = token.isEmpty() ? env.getOrDefault("CUMULO_PREFIX", "") : "";
        return new Options(socket, token, prefix, threadIndex, 1);
    }

    public Options withThreadIndex(long index) {
        return new Options(socket, token, prefix, index, window, tlsCa, tlsCert, tlsKey);
    }

    public Options withWindow(long requests) {
        return new Options(socket, token, prefix, threadIndex, requests, tlsCa, tlsCert, tlsKey);
    }

    public Options withToken(String newToken) {
        return new Options(socket, newToken, prefix, threadIndex, window, tlsCa, tlsCert, tlsKey);
    }

    /**
     * With TLS files that win over {@code CUMULO_TLS_CA}, {@code CUMULO_TLS_CERT} and
     * {@code CUMULO_TLS_KEY}; null or empty leaves that one to the environment.
     */
    public Options withTls(String ca, String cert, String key) {
        return new Options(socket, token, prefix, threadIndex, window, ca, cert, key);
    }
}
