/* TLS to the core's TCP listener (OpenSSL), chosen once at connect time when
 * a CA file is given (cumulo_config.tls_ca or CUMULO_TLS_CA) for a
 * tcp://host:port address. The framed protocol runs unchanged inside it. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A given option wins over the environment; "" means none. */
static const char *tls_setting(const char *given, const char *env_name) {
    const char *value = given ? given : getenv(env_name);
    return value && *value ? value : NULL;
}

/* The reason of the latest OpenSSL error (the queue is then cleared). */
static const char *ssl_reason(char *buf, size_t len) {
    unsigned long code = ERR_peek_last_error();
    if (code)
        ERR_error_string_n(code, buf, len);
    else
        snprintf(buf, len, "%s", errno ? strerror(errno) : "no reason given");
    ERR_clear_error();
    return buf;
}

int cumulo__tls_context(cumulo_api *api, const cumulo_config *config, struct ssl_ctx_st **out) {
    *out = NULL;
    const char *ca = tls_setting(config ? config->tls_ca : NULL, "CUMULO_TLS_CA");
    const char *cert = tls_setting(config ? config->tls_cert : NULL, "CUMULO_TLS_CERT");
    const char *key = tls_setting(config ? config->tls_key : NULL, "CUMULO_TLS_KEY");
    if (!ca) return CUMULO_OK; /* plain TCP */
    if (!cert != !key)
        return cumulo__fail(api, CUMULO_E_CONFIG,
                            "a client certificate needs both CUMULO_TLS_CERT and CUMULO_TLS_KEY "
                            "(tls_cert and tls_key): only %s is given",
                            cert ? "the certificate" : "the key");
    char reason[256];
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return cumulo__fail(api, CUMULO_E_NOMEM, "TLS: %s", ssl_reason(reason, sizeof reason));
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* The core's certificate is checked against this CA file only, never
       the system store. */
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    int rc = CUMULO_OK;
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        rc = cumulo__fail(api, CUMULO_E_CONFIG, "cannot load the TLS CA file '%s': %s", ca,
                          ssl_reason(reason, sizeof reason));
    } else if (cert && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        rc = cumulo__fail(api, CUMULO_E_CONFIG, "cannot load the TLS certificate file '%s': %s",
                          cert, ssl_reason(reason, sizeof reason));
    } else if (key && SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        rc = cumulo__fail(api, CUMULO_E_CONFIG, "cannot load the TLS key file '%s': %s", key,
                          ssl_reason(reason, sizeof reason));
    } else if (cert && SSL_CTX_check_private_key(ctx) != 1) {
        rc = cumulo__fail(api, CUMULO_E_CONFIG, "the TLS key '%s' does not match the certificate '%s': %s",
                          key, cert, ssl_reason(reason, sizeof reason));
    }
    if (rc != CUMULO_OK) {
        SSL_CTX_free(ctx);
        return rc;
    }
    *out = ctx;
    return CUMULO_OK;
}

void cumulo__tls_context_free(struct ssl_ctx_st *ctx) { SSL_CTX_free(ctx); }

/* A socket BIO that writes with MSG_NOSIGNAL: OpenSSL's own writes with
 * write(2), and a core that closed the connection would kill the process
 * with SIGPIPE instead of returning CUMULO_E_CLOSED. */
static int bio_fd(BIO *bio) { return (int)(intptr_t)BIO_get_data(bio); }

static int bio_write(BIO *bio, const char *data, int len) {
    BIO_clear_retry_flags(bio);
    ssize_t n = send(bio_fd(bio), data, (size_t)len, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(bio);
    return (int)n;
}

static int bio_read(BIO *bio, char *data, int len) {
    BIO_clear_retry_flags(bio);
    ssize_t n = recv(bio_fd(bio), data, (size_t)len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(bio);
    return (int)n;
}

static long bio_ctrl(BIO *bio, int cmd, long num, void *ptr) {
    (void)bio, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* writes are not buffered */
}

static int bio_create(BIO *bio) {
    BIO_set_init(bio, 1);
    return 1;
}

static BIO_METHOD *socket_method;
static pthread_once_t socket_method_once = PTHREAD_ONCE_INIT;

static void make_socket_method(void) {
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cumulo socket");
    if (!m) return;
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    socket_method = m;
}

/* The host part of "host:port" or "[v6]:port". */
static void host_of(const char *hostport, char *host, size_t len) {
    const char *colon = strrchr(hostport, ':');
    size_t n = colon ? (size_t)(colon - hostport) : strlen(hostport);
    if (hostport[0] == '[' && n >= 2 && hostport[n - 1] == ']') {
        hostport++;
        n -= 2;
    }
    if (n >= len) n = len - 1;
    memcpy(host, hostport, n);
    host[n] = '\0';
}

static int handshake_failed(cumulo_api *api, SSL *ssl, const char *hostport, int err) {
    char reason[256];
    if (err == SSL_ERROR_SYSCALL && !ERR_peek_last_error())
        snprintf(reason, sizeof reason, "%s",
                 errno ? strerror(errno) : "the core closed the connection");
    else
        ssl_reason(reason, sizeof reason);
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK)
        return cumulo__fail(api, CUMULO_E_IO, "TLS handshake with tcp://%s failed: %s (%s)", hostport,
                            reason, X509_verify_cert_error_string(verify));
    return cumulo__fail(api, CUMULO_E_IO, "TLS handshake with tcp://%s failed: %s", hostport, reason);
}

int cumulo__tls_start(cumulo_api *api, struct ssl_ctx_st *ctx, const char *hostport,
                      int64_t deadline) {
    pthread_once(&socket_method_once, make_socket_method);
    /* Non-blocking, so that no SSL call can wait past a deadline: each one
       that needs the network says so and waits in poll. */
    int flags = fcntl(api->fd, F_GETFL);
    if (flags < 0 || fcntl(api->fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return cumulo__fail(api, CUMULO_E_IO, "fcntl: %s", strerror(errno));
    ERR_clear_error();
    SSL *ssl = SSL_new(ctx);
    BIO *bio = socket_method ? BIO_new(socket_method) : NULL;
    if (!ssl || !bio) {
        char reason[256];
        SSL_free(ssl);
        BIO_free(bio);
        return cumulo__fail(api, CUMULO_E_NOMEM, "TLS: %s", ssl_reason(reason, sizeof reason));
    }
    BIO_set_data(bio, (void *)(intptr_t)api->fd);
    SSL_set_bio(ssl, bio, bio);
    /* Partial writes let write_all send a frame record by record; without
       auto-retry a read that only handled a session ticket comes back to
       poll, with the deadline, instead of blocking. */
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_clear_mode(ssl, SSL_MODE_AUTO_RETRY);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A core that closes without close_notify has closed, as over plain TCP
       (a truncated frame is still caught by the framing). */
    SSL_set_options(ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    api->tls = ssl;

    char host[256];
    host_of(hostport, host, sizeof host);
    unsigned char ip[sizeof(struct in6_addr)];
    bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
                   : SSL_set_tlsext_host_name(ssl, host) == 1 && SSL_set1_host(ssl, host) == 1;
    if (!ok) {
        char reason[256];
        return cumulo__fail(api, CUMULO_E_CONFIG, "TLS: cannot check the name '%s': %s", host,
                            ssl_reason(reason, sizeof reason));
    }
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_connect(ssl);
        if (n == 1) return CUMULO_OK;
        int err = SSL_get_error(ssl, n);
        int rc;
        if (err == SSL_ERROR_WANT_READ)
            rc = cumulo__wait_fd(api, POLLIN, deadline);
        else if (err == SSL_ERROR_WANT_WRITE)
            rc = cumulo__wait_fd(api, POLLOUT, deadline);
        else
            return handshake_failed(api, ssl, hostport, err);
        if (rc == CUMULO_TIMEOUT)
            return cumulo__fail(api, rc, "TLS handshake with tcp://%s: no answer from the core",
                                hostport);
        if (rc != CUMULO_OK) return rc;
    }
}

void cumulo__tls_free(cumulo_api *api, bool notify) {
    if (!api->tls) return;
    if (notify) SSL_shutdown(api->tls); /* close_notify, not waiting for the core's */
    SSL_free(api->tls);
    api->tls = NULL;
}

/* A failed SSL_read/SSL_write: closes the connection with the reason. */
static int io_failed(cumulo_api *api, int err, const char *what) {
    char reason[256];
    int status = CUMULO_E_IO;
    if (err == SSL_ERROR_ZERO_RETURN)
        return cumulo__close(api, cumulo__fail(api, CUMULO_E_CLOSED, "the core closed the connection"));
    if (err == SSL_ERROR_SYSCALL && !ERR_peek_last_error()) {
        if (errno == 0 || errno == EPIPE || errno == ECONNRESET) status = CUMULO_E_CLOSED;
        snprintf(reason, sizeof reason, "%s", errno ? strerror(errno) : "the core closed the connection");
    } else {
        ssl_reason(reason, sizeof reason);
    }
    return cumulo__close(api, cumulo__fail(api, status, "%s (TLS): %s", what, reason));
}

int cumulo__tls_read(cumulo_api *api, uint8_t *buf, size_t cap, int64_t deadline, size_t *got) {
    int len = cap > INT_MAX ? INT_MAX : (int)cap;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_read(api->tls, buf, len);
        if (n > 0) {
            *got = (size_t)n;
            return CUMULO_OK;
        }
        int err = SSL_get_error(api->tls, n);
        int rc;
        if (err == SSL_ERROR_WANT_READ)
            rc = cumulo__wait_fd(api, POLLIN, deadline);
        else if (err == SSL_ERROR_WANT_WRITE)
            rc = cumulo__wait_fd(api, POLLOUT, deadline);
        else
            return io_failed(api, err, "read from core");
        if (rc != CUMULO_OK) return rc;
    }
}

int cumulo__tls_write(cumulo_api *api, const uint8_t *data, size_t len) {
    while (len) {
        ERR_clear_error();
        errno = 0;
        int n = SSL_write(api->tls, data, len > INT_MAX ? INT_MAX : (int)len);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
            continue;
        }
        int err = SSL_get_error(api->tls, n);
        int rc;
        if (err == SSL_ERROR_WANT_WRITE)
            rc = cumulo__wait_fd(api, POLLOUT, -1);
        else if (err == SSL_ERROR_WANT_READ)
            rc = cumulo__wait_fd(api, POLLIN, -1);
        else
            return io_failed(api, err, "write to core");
        if (rc != CUMULO_OK) return rc;
    }
    return CUMULO_OK;
}
