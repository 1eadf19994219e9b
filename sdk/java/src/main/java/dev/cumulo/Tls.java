package dev.cumulo;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/**
 * The TLS settings of a connection to the core's TCP listener: a CA file (and optionally a client
 * certificate and key) from {@link Options}, else from {@code CUMULO_TLS_CA}, {@code CUMULO_TLS_CERT}
 * and {@code CUMULO_TLS_KEY}.
 */
final class Tls {
    private static final Pattern PKCS8 =
            Pattern.compile("-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END PRIVATE KEY-----");
    private static final char[] NO_PASSWORD = new char[0];

    private Tls() {}

    /**
     * The TLS context for a connection to {@code options.socket()}, or null when it is plain: no
     * CA named, or a Unix socket (local, so TLS would protect nothing).
     */
    static SSLContext context(Options options, Map<String, String> env) throws IOException {
        String ca = pick(options.tlsCa(), env.get("CUMULO_TLS_CA"));
        if (ca == null || !options.socket().startsWith("tcp://")) {
            return null;
        }
        String cert = pick(options.tlsCert(), env.get("CUMULO_TLS_CERT"));
        String key = pick(options.tlsKey(), env.get("CUMULO_TLS_KEY"));
        if ((cert == null) != (key == null)) {
            throw new CumuloException(Status.INVALID_ARGUMENT, "a TLS client certificate and key go together"
                    + " (CUMULO_TLS_CERT, CUMULO_TLS_KEY): only the " + (cert != null ? "certificate" : "key") + " is given");
        }
        try {
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(cert == null ? null : keyManagers(cert, key), trustManagers(ca), null);
            return context;
        } catch (GeneralSecurityException e) {
            throw new CumuloException(Status.INVALID_ARGUMENT, "TLS settings: " + e.getMessage());
        }
    }

    /**
     * Trusts the CAs of the PEM file {@code ca} only, not the system store: the core's certificate
     * usually comes from a private CA, and trusting more would widen who can pose as the core.
     */
    static TrustManager[] trustManagers(String ca) throws GeneralSecurityException, IOException {
        KeyStore trusted = emptyKeyStore();
        int i = 0;
        for (Certificate c : certificates(ca, "TLS CA")) {
            trusted.setCertificateEntry("ca" + i++, c);
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trusted);
        return tmf.getTrustManagers();
    }

    /** The certificate (chain) of the PEM file {@code cert} with the PKCS#8 PEM key {@code key}. */
    static KeyManager[] keyManagers(String cert, String key) throws GeneralSecurityException, IOException {
        KeyStore identity = emptyKeyStore();
        identity.setKeyEntry("identity", privateKey(key), NO_PASSWORD,
                certificates(cert, "TLS certificate").toArray(new Certificate[0]));
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(identity, NO_PASSWORD);
        return kmf.getKeyManagers();
    }

    private static String pick(String option, String env) {
        if (option != null && !option.isEmpty()) {
            return option;
        }
        return env == null || env.isEmpty() ? null : env;
    }

    private static KeyStore emptyKeyStore() throws GeneralSecurityException, IOException {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        return store;
    }

    private static byte[] read(String file, String what) throws CumuloException {
        try {
            return Files.readAllBytes(Path.of(file));
        } catch (IOException e) {
            throw new CumuloException(Status.INVALID_ARGUMENT, "cannot read the " + what + " file " + file + ": " + e);
        }
    }

    private static Collection<? extends Certificate> certificates(String file, String what)
            throws GeneralSecurityException, CumuloException {
        Collection<? extends Certificate> certs =
                CertificateFactory.getInstance("X.509").generateCertificates(new ByteArrayInputStream(read(file, what)));
        if (certs.isEmpty()) {
            throw new CumuloException(Status.INVALID_ARGUMENT, "no PEM certificate in the " + what + " file " + file);
        }
        return certs;
    }

    /** A PKCS#8 PEM key ({@code BEGIN PRIVATE KEY}): EC, else RSA. */
    private static PrivateKey privateKey(String file) throws GeneralSecurityException, CumuloException {
        Matcher m = PKCS8.matcher(new String(read(file, "TLS key"), StandardCharsets.US_ASCII));
        if (!m.find()) {
            throw new CumuloException(Status.INVALID_ARGUMENT,
                    "the TLS key file " + file + " holds no PKCS#8 key (-----BEGIN PRIVATE KEY-----)");
        }
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(Base64.getMimeDecoder().decode(m.group(1)));
        try {
            return KeyFactory.getInstance("EC").generatePrivate(spec);
        } catch (InvalidKeySpecException notEc) {
            return KeyFactory.getInstance("RSA").generatePrivate(spec);
        }
    }
}
