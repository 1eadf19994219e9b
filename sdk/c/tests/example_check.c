/* Runs an http_req example binary as the core would (environment, Unix
 * socket, CUMULO_THREAD_COUNT=2) against the fake core, and checks every
 * answer of docs/SDK_GUIDE.md byte for byte.
 * Usage: example_check BINARY PATTERN   e.g. example_check ./http_req c.xml/get */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cumulo.h"
#include "fake_core.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

CHECK_DEFINE_COUNTER;

#define THREADS 2
#define PREFIX "/tests/http_req/"

static const char CONTENT_TYPE[] = "content-type\0text/xml; charset=utf-8\0";
static const char NO_VALUE[] = "<http_test><error>no value specified</error></http_test>";

typedef struct exchange {
    const char *body; /* request bytes (may hold NULs) */
    size_t len;
    const char *answer;
} exchange;

#define BODY(literal) literal, sizeof literal - 1

static const exchange EXCHANGES[] = {
    {BODY("value\00042\0"), "<http_test><value>42</value></http_test>"},
    {BODY("value\000+007\0"), "<http_test><value>7</value></http_test>"},
    {BODY("value\000-3\0"), "<http_test><value>-3</value></http_test>"},
    {BODY("other\0001\0value\0005\0value\0006\0"), "<http_test><value>5</value></http_test>"},
    {BODY("value\0009223372036854775807\0"), "<http_test><value>9223372036854775807</value></http_test>"},
    {BODY("value\000-9223372036854775808\0"), "<http_test><value>-9223372036854775808</value></http_test>"},
    {BODY("value\0009223372036854775808\0"), NO_VALUE},
    {BODY("value\000abc\0"), NO_VALUE},
    {BODY("value\000\0"), NO_VALUE},
    {BODY("value\000-\0"), NO_VALUE},
    {BODY("value\000 42\0"), NO_VALUE},
    {BODY("value\0004 2\0"), NO_VALUE},
    {BODY("value\0001.5\0"), NO_VALUE},
    {BODY("other\00042\0"), NO_VALUE},
    {BODY(""), NO_VALUE},
    {BODY("value\00042"), NO_VALUE}, /* malformed: no final NUL */
    {BODY("value\0"), NO_VALUE},     /* malformed: odd fields */
};

static pid_t start_example(const char *binary, const char *socket_path) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CUMULO_SOCKET", socket_path, 1);
        setenv("CUMULO_PREFIX", PREFIX, 1);
        setenv("CUMULO_THREAD_COUNT", "2", 1);
        setenv("CUMULO_PROCESS_INDEX", "0", 1);
        setenv("CUMULO_PROCESS_COUNT", "1", 1);
        unsetenv("CUMULO_TOKEN"); /* unmanaged: the prefix comes from CUMULO_PREFIX */
        execl(binary, binary, (char *)NULL);
        perror("exec");
        _exit(127);
    }
    return pid;
}

/* Waits up to 10 s for the example to exit; returns its exit status or -1. */
static int wait_exit(pid_t pid) {
    for (int i = 0; i < 1000; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: example_check BINARY PATTERN\n");
        return 2;
    }
    char dir[] = "/tmp/cumulo-example-XXXXXX", path[100];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cumulo.sock", dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(listen_fd, 8) == 0);

    pid_t pid = start_example(argv[1], path);
    fake_core cores[THREADS];
    for (int t = 0; t < THREADS; t++) {
        fc_init(&cores[t], accept(listen_fd, NULL, NULL));
        cumulo_frame f;
        if (fc_expect(&cores[t], CUMULO_FRAME_HELLO, &f))
            CHECK_VIEW(f.u.hello.prefix.data, f.u.hello.prefix.len, PREFIX);
        fc_welcome(&cores[t], PREFIX, CUMULO_DEFAULT_MAX_FRAME);
        if (fc_expect(&cores[t], CUMULO_FRAME_SUBSCRIBE, &f)) {
            CHECK_VIEW(f.u.control.pattern.data, f.u.control.pattern.len, argv[2]);
            fc_send_reply(&cores[t], f.u.control.req_id, CUMULO_OK, 0, "");
        }
    }
    char full[256];
    snprintf(full, sizeof full, "%s%s", PREFIX, argv[2]);
    size_t count = sizeof EXCHANGES / sizeof EXCHANGES[0];
    for (size_t i = 0; i < count; i++) {
        fake_core *fc = &cores[i % THREADS]; /* both threads serve */
        cumulo_trans_id tid = fc_tid((uint8_t)i);
        fc_send_request(fc, &tid, full, full, "", 0, EXCHANGES[i].body, EXCHANGES[i].len);
        cumulo_frame f;
        if (!fc_expect(fc, CUMULO_FRAME_RETURN, &f)) continue;
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &tid));
        CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
        CHECK(f.u.answer.response_info.len == sizeof CONTENT_TYPE - 1 &&
              memcmp(f.u.answer.response_info.data, CONTENT_TYPE, sizeof CONTENT_TYPE - 1) == 0);
        if (f.u.answer.response.len != strlen(EXCHANGES[i].answer) ||
            memcmp(f.u.answer.response.data, EXCHANGES[i].answer, f.u.answer.response.len) != 0) {
            fprintf(stderr, "request %zu: answer '%.*s', expected '%s'\n", i,
                    (int)f.u.answer.response.len, (const char *)f.u.answer.response.data,
                    EXCHANGES[i].answer);
            atomic_fetch_add(&check_failures, 1);
        }
    }
    for (int t = 0; t < THREADS; t++) fc_send_simple(&cores[t], CUMULO_FRAME_TERMINATE);
    for (int t = 0; t < THREADS; t++) {
        CHECK(fc_eof(&cores[t]));
        fc_close(&cores[t]);
    }
    CHECK_EQ_INT(wait_exit(pid), 0);
    close(listen_fd);
    unlink(path);
    rmdir(dir);
    printf("%zu requests checked\n", count);
    return check_report(argv[2]);
}
