/* TLS tests: the SDK connects to tcp://host:port through a TLS front (an
 * OpenSSL server in a thread) that relays the bytes to the scripted fake
 * core, with certificates from tests/tls/make_certs.sh. Each test is one
 * CTest case: `test_tls NAME`. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cumulo.h"
#include "fake_core.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

CHECK_DEFINE_COUNTER;

#define MIB (1024u * 1024u)

static char certs[64];

static const char *cert_file(const char *name) {
    static char paths[8][128];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 128, "%s/%s", certs, name);
    return p;
}

static bool make_certs(void) {
    snprintf(certs, sizeof certs, "/tmp/cumulo-c-tls-XXXXXX");
    if (!mkdtemp(certs)) return false;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "bash '%s' '%s' >/dev/null 2>&1", CUMULO_MAKE_CERTS, certs);
    return system(cmd) == 0;
}

static void remove_certs(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", certs);
}

static void clear_env(void) {
    unsetenv("CUMULO_TLS_CA");
    unsetenv("CUMULO_TLS_CERT");
    unsetenv("CUMULO_TLS_KEY");
}

/* ------------------------------------------------------- the TLS front */

typedef void (*core_script)(fake_core *fc, void *arg);

typedef struct front {
    int listen_fd;
    char spec[64]; /* tcp://ADDR:PORT */
    bool require_client_cert;
    bool tls12_only;
    core_script script;
    pthread_t thread;
    bool handshake_ok;
} front;

typedef struct core_thread {
    pthread_t thread;
    fake_core fc;
    core_script script;
} core_thread;

static void *core_main(void *p) {
    core_thread *ct = p;
    ct->script(&ct->fc, NULL);
    return NULL;
}

/* Copies bytes both ways between the TLS session and the fake core's
 * socket until either side closes. */
static void relay(SSL *ssl, int tcp_fd, int core_fd) {
    static uint8_t buf[64 * 1024];
    for (;;) {
        if (SSL_pending(ssl) == 0) {
            struct pollfd p[2] = {{tcp_fd, POLLIN, 0}, {core_fd, POLLIN, 0}};
            if (poll(p, 2, 10000) <= 0) return;
            if (p[1].revents) {
                ssize_t n = read(core_fd, buf, sizeof buf);
                if (n <= 0) return;
                if (SSL_write(ssl, buf, (int)n) != (int)n) return;
                continue;
            }
        }
        int n = SSL_read(ssl, buf, sizeof buf);
        if (n <= 0) return;
        for (int off = 0; off < n;) {
            ssize_t w = write(core_fd, buf + off, (size_t)(n - off));
            if (w <= 0) return;
            off += (int)w;
        }
    }
}

static void *front_main(void *p) {
    front *fr = p;
    int fd = accept(fr->listen_fd, NULL, NULL);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    CHECK(SSL_CTX_use_certificate_chain_file(ctx, cert_file("server.pem")) == 1);
    CHECK(SSL_CTX_use_PrivateKey_file(ctx, cert_file("server.key"), SSL_FILETYPE_PEM) == 1);
    if (fr->tls12_only) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    if (fr->require_client_cert) {
        CHECK(SSL_CTX_load_verify_locations(ctx, cert_file("ca.pem"), NULL) == 1);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    fr->handshake_ok = SSL_accept(ssl) == 1;
    if (fr->handshake_ok) {
        CHECK(SSL_version(ssl) == (fr->tls12_only ? TLS1_2_VERSION : TLS1_3_VERSION));
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        core_thread ct = {.script = fr->script};
        fc_init(&ct.fc, sv[1]);
        pthread_create(&ct.thread, NULL, core_main, &ct);
        relay(ssl, fd, sv[0]);
        close(sv[0]); /* the fake core sees the instance's end */
        pthread_join(ct.thread, NULL);
        fc_close(&ct.fc);
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    ERR_clear_error();
    return NULL;
}

/* Listens on addr (127.0.0.1 or another loopback address) with options
 * (FRONT_*); false if it cannot be bound. */
enum { FRONT_CLIENT_CERT = 1, FRONT_TLS12 = 2 };

static bool start_front(front *fr, const char *addr, int options, core_script script) {
    *fr = (front){.require_client_cert = options & FRONT_CLIENT_CERT,
                  .tls12_only = options & FRONT_TLS12,
                  .script = script};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    fr->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(fr->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fr->listen_fd);
        return false;
    }
    CHECK(listen(fr->listen_fd, 8) == 0);
    socklen_t len = sizeof sa;
    getsockname(fr->listen_fd, (struct sockaddr *)&sa, &len);
    snprintf(fr->spec, sizeof fr->spec, "tcp://%s:%u", addr, ntohs(sa.sin_port));
    pthread_create(&fr->thread, NULL, front_main, fr);
    return true;
}

static void join_front(front *fr) {
    pthread_join(fr->thread, NULL);
    close(fr->listen_fd);
}

/* ------------------------------------------------------------ scripts */

/* HELLO/WELCOME, then echoes one SEND_SYNC's body back. */
static void core_echo(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/tls/", 16 * MIB);
    if (!fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) return;
    cumulo_trans_id tid = f.u.send.trans_id;
    fc_send_response(fc, &tid, CUMULO_OK, "", 0, f.u.send.request.data, f.u.send.request.len);
    CHECK(fc_eof(fc));
}

/* A request of 1 MiB and its echo go through the TLS session intact: many
 * records each way, partial reads and writes. */
static void echo_through(cumulo_api *api) {
    uint8_t *request = malloc(MIB);
    for (size_t i = 0; i < MIB; i++) request[i] = (uint8_t)(i % 251);
    cumulo_response response;
    CHECK_STATUS(cumulo_send_sync(api, "/svc/echo", request, MIB, NULL, &response), CUMULO_OK);
    CHECK_EQ_INT(response.response.len, MIB);
    CHECK(response.response.len == MIB && memcmp(response.response.data, request, MIB) == 0);
    free(request);
}

/* Connects to the front with the environment as it is; expects success. */
static void connect_and_echo(front *fr, const char *spec) {
    char error[512] = "";
    cumulo_api *api = NULL;
    int rc = cumulo_connect_unmanaged(&api, spec, "/tls/", error, sizeof error);
    CHECK_STATUS(rc, CUMULO_OK);
    if (rc != CUMULO_OK) fprintf(stderr, "connect: %s\n", error);
    if (api) echo_through(api);
    cumulo_destroy(api);
    join_front(fr);
    CHECK(fr->handshake_ok);
}

/* Connects with the environment as it is; expects a failure whose message
 * holds want. */
static void connect_refused(front *fr, const char *want) {
    char error[512] = "";
    cumulo_api *api = NULL;
    int rc = cumulo_connect_unmanaged(&api, fr->spec, "/tls/", error, sizeof error);
    CHECK(rc != CUMULO_OK);
    CHECK(api == NULL);
    printf("refused: %s\n", error);
    if (!strstr(error, want)) {
        fprintf(stderr, "error '%s' does not say '%s'\n", error, want);
        CHECK(strstr(error, want) != NULL);
    }
    cumulo_destroy(api);
    join_front(fr);
}

/* -------------------------------------------------------------- tests */

static void test_verified(void) {
    front fr;
    setenv("CUMULO_TLS_CA", cert_file("ca.pem"), 1);
    /* the certificate's IP address */
    CHECK(start_front(&fr, "127.0.0.1", 0, core_echo));
    connect_and_echo(&fr, fr.spec);
    /* its DNS name */
    CHECK(start_front(&fr, "127.0.0.1", 0, core_echo));
    char spec[64];
    snprintf(spec, sizeof spec, "tcp://localhost%s", strrchr(fr.spec, ':'));
    connect_and_echo(&fr, spec);
    /* TLS 1.2 */
    CHECK(start_front(&fr, "127.0.0.1", FRONT_TLS12, core_echo));
    connect_and_echo(&fr, fr.spec);
    /* the explicit option wins over the environment */
    setenv("CUMULO_TLS_CA", cert_file("other-ca.pem"), 1);
    CHECK(start_front(&fr, "127.0.0.1", 0, core_echo));
    cumulo_config config = {.socket = fr.spec, .token = "", .prefix = "/tls/",
                            .tls_ca = cert_file("ca.pem")};
    char error[512] = "";
    cumulo_api *api = NULL;
    CHECK_STATUS(cumulo_connect(&api, &config, error, sizeof error), CUMULO_OK);
    if (api) echo_through(api);
    cumulo_destroy(api);
    join_front(&fr);
    clear_env();
}

static void test_refused(void) {
    front fr;
    /* a CA that did not sign the core's certificate */
    setenv("CUMULO_TLS_CA", cert_file("other-ca.pem"), 1);
    CHECK(start_front(&fr, "127.0.0.1", 0, core_echo));
    connect_refused(&fr, "certificate verify failed");
    /* a name the certificate does not carry (127.0.0.2 is loopback too) */
    setenv("CUMULO_TLS_CA", cert_file("ca.pem"), 1);
    if (start_front(&fr, "127.0.0.2", 0, core_echo))
        connect_refused(&fr, "mismatch");
    else
        fprintf(stderr, "127.0.0.2 cannot be bound here: name mismatch not tested\n");
    clear_env();
}

static void test_client_cert(void) {
    front fr;
    setenv("CUMULO_TLS_CA", cert_file("ca.pem"), 1);
    setenv("CUMULO_TLS_CERT", cert_file("client.pem"), 1);
    setenv("CUMULO_TLS_KEY", cert_file("client.key"), 1);
    CHECK(start_front(&fr, "127.0.0.1", FRONT_CLIENT_CERT, core_echo));
    connect_and_echo(&fr, fr.spec);
    /* without one, the core refuses the session (after the handshake, in
       TLS 1.3: the connect still fails) */
    unsetenv("CUMULO_TLS_CERT");
    unsetenv("CUMULO_TLS_KEY");
    CHECK(start_front(&fr, "127.0.0.1", FRONT_CLIENT_CERT, core_echo));
    connect_refused(&fr, "TLS");
    CHECK(!fr.handshake_ok);
    clear_env();
}

/* Settings that cannot work are told before connecting: nothing listens at
 * the address. */
static void expect_config_error(const cumulo_config *config, const char *want) {
    char error[512] = "";
    cumulo_api *api = NULL;
    CHECK_STATUS(cumulo_connect(&api, config, error, sizeof error), CUMULO_E_CONFIG);
    CHECK(api == NULL);
    if (!strstr(error, want)) {
        fprintf(stderr, "error '%s' does not say '%s'\n", error, want);
        CHECK(strstr(error, want) != NULL);
    }
}

/* A plain listener (TCP or Unix) serving core_echo on the connection it
 * accepts. */
typedef struct plain {
    int listen_fd;
    pthread_t thread;
} plain;

static void *plain_main(void *p) {
    plain *pl = p;
    int fd = accept(pl->listen_fd, NULL, NULL);
    CHECK(fd >= 0);
    if (fd < 0) return NULL;
    fake_core fc;
    fc_init(&fc, fd);
    core_echo(&fc, NULL);
    fc_close(&fc);
    return NULL;
}

static void plain_echo(int listen_fd, const cumulo_config *config) {
    CHECK(listen(listen_fd, 8) == 0);
    plain pl = {.listen_fd = listen_fd};
    pthread_create(&pl.thread, NULL, plain_main, &pl);
    char error[512] = "";
    cumulo_api *api = NULL;
    int rc = cumulo_connect(&api, config, error, sizeof error);
    CHECK_STATUS(rc, CUMULO_OK);
    if (rc != CUMULO_OK) fprintf(stderr, "connect: %s\n", error);
    if (api) echo_through(api);
    cumulo_destroy(api);
    pthread_join(pl.thread, NULL);
    close(listen_fd);
}

static void test_settings(void) {
    cumulo_config config = {.socket = "tcp://127.0.0.1:1", .token = "", .prefix = "/tls/"};
    setenv("CUMULO_TLS_CA", cert_file("ca.pem"), 1);
    setenv("CUMULO_TLS_CERT", cert_file("client.pem"), 1);
    expect_config_error(&config, "CUMULO_TLS_KEY");
    unsetenv("CUMULO_TLS_CERT");
    setenv("CUMULO_TLS_KEY", cert_file("client.key"), 1);
    expect_config_error(&config, "CUMULO_TLS_CERT");
    unsetenv("CUMULO_TLS_KEY");
    setenv("CUMULO_TLS_CA", cert_file("missing.pem"), 1);
    expect_config_error(&config, "missing.pem");
    config.tls_ca = cert_file("ca.pem");
    config.tls_cert = cert_file("client.pem");
    config.tls_key = cert_file("server.key"); /* not the certificate's key */
    expect_config_error(&config, "server.key");
    config.tls_cert = config.tls_key = NULL;

    /* tls_ca "" turns TLS off whatever the environment says: plain TCP */
    config.tls_ca = "";
    int tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(tcp_fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(tcp_fd, (struct sockaddr *)&addr, &len);
    char spec[64];
    snprintf(spec, sizeof spec, "tcp://127.0.0.1:%u", ntohs(addr.sin_port));
    config.socket = spec;
    plain_echo(tcp_fd, &config);

    /* a Unix socket is local: the TLS settings do not apply to it */
    char dir[] = "/tmp/cumulo-c-tls-sock-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s/cumulo.sock", dir);
    int unix_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(unix_fd, (struct sockaddr *)&un, sizeof un) == 0);
    config = (cumulo_config){.socket = un.sun_path, .token = "", .prefix = "/tls/"};
    setenv("CUMULO_TLS_CA", cert_file("missing.pem"), 1);
    setenv("CUMULO_TLS_CERT", cert_file("client.pem"), 1);
    plain_echo(unix_fd, &config);
    unlink(un.sun_path);
    rmdir(dir);
    clear_env();
}

typedef struct {
    const char *name;
    void (*run)(void);
} test_case;

static const test_case TESTS[] = {
    {"verified", test_verified},
    {"refused", test_refused},
    {"client_cert", test_client_cert},
    {"settings", test_settings},
};

int main(int argc, char **argv) {
    if (!make_certs()) {
        fprintf(stderr, "%s failed (is the openssl command installed?)\n", CUMULO_MAKE_CERTS);
        return 1;
    }
    clear_env();
    int ran = 0;
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        if (argc > 1 && strcmp(argv[1], TESTS[i].name) != 0) continue;
        TESTS[i].run();
        ran++;
    }
    remove_certs();
    if (!ran) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return check_report(argc > 1 ? argv[1] : "test_tls");
}
