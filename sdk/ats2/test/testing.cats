/* C side of the ATS2 test program (test/test_ats2.dats): the fake core's
 * frames, built and read with the C SDK's codec, and one canonical text per
 * frame field, so that ATS compares decoded frames with the vectors' fields
 * (test/vectors_tsv.py renders those the same way). */
#ifndef CUMULO_ATS_TESTING_CATS
#define CUMULO_ATS_TESTING_CATS

#include "cumulo.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char *testing_hex(const uint8_t *data, size_t len) {
    char *s = malloc(2 * len + 1);
    if (!s) abort();
    for (size_t i = 0; i < len; i++) snprintf(s + 2 * i, 3, "%02x", data[i]);
    s[2 * len] = 0;
    return s;
}
static char *testing_num(unsigned long long v, int negative) {
    char *s = malloc(32);
    if (!s) abort();
    snprintf(s, 32, negative ? "-%llu" : "%llu", v);
    return s;
}
static char *testing_int(long long v) { return v < 0 ? testing_num((unsigned long long)(-(v + 1)) + 1, 1) : testing_num((unsigned long long)v, 0); }

/* The field `name` of a decoded frame as text: integers in decimal, str as
 * the hex of its UTF-8, bytes and trans_ids in hex, MCAST_SENT's trans_ids
 * joined by commas; "?" for a field the frame does not have. */
static char *testing_frame_field(const cumulo_frame *f, const char *name) {
#define IS(n) (strcmp(name, n) == 0)
#define STR(s) testing_hex((const uint8_t *)(s).data, (s).len)
#define BYTES(b) testing_hex((b).data, (b).len)
#define TID(t) testing_hex((t).bytes, 16)
    switch (f->type) {
    case CUMULO_FRAME_HELLO:
        if (IS("version")) return testing_int(f->u.hello.version);
        if (IS("window")) return testing_int(f->u.hello.window);
        if (IS("thread_index")) return testing_int(f->u.hello.thread_index);
        if (IS("token")) return STR(f->u.hello.token);
        if (IS("prefix")) return STR(f->u.hello.prefix);
        break;
    case CUMULO_FRAME_SUBSCRIBE: case CUMULO_FRAME_UNSUBSCRIBE: case CUMULO_FRAME_SUBSCRIBE_COUNT:
        if (IS("req_id")) return testing_int(f->u.control.req_id);
        if (IS("pattern")) return STR(f->u.control.pattern);
        break;
    case CUMULO_FRAME_SEND_ASYNC: case CUMULO_FRAME_SEND_SYNC: case CUMULO_FRAME_MCAST_ASYNC: case CUMULO_FRAME_FORWARD:
        if (IS("trans_id")) return TID(f->u.send.trans_id);
        if (IS("timeout")) return testing_int(f->u.send.timeout);
        if (IS("priority")) return testing_int(f->u.send.priority);
        if (IS("flags")) return testing_int(f->u.send.flags);
        if (IS("name")) return STR(f->u.send.name);
        if (IS("request_info")) return BYTES(f->u.send.request_info);
        if (IS("request")) return BYTES(f->u.send.request);
        break;
    case CUMULO_FRAME_RETURN: case CUMULO_FRAME_RESPONSE:
        if (IS("trans_id")) return TID(f->u.answer.trans_id);
        if (IS("status")) return testing_int(f->u.answer.status);
        if (IS("response_info")) return BYTES(f->u.answer.response_info);
        if (IS("response")) return BYTES(f->u.answer.response);
        break;
    case CUMULO_FRAME_PING: case CUMULO_FRAME_PONG:
        if (IS("nonce")) return testing_num(f->u.ping.nonce, 0);
        break;
    case CUMULO_FRAME_WELCOME:
        if (IS("version")) return testing_int(f->u.welcome.version);
        if (IS("node_id")) return testing_int(f->u.welcome.node_id);
        if (IS("instance_id")) return testing_int(f->u.welcome.instance_id);
        if (IS("process_index")) return testing_int(f->u.welcome.process_index);
        if (IS("process_count")) return testing_int(f->u.welcome.process_count);
        if (IS("thread_count")) return testing_int(f->u.welcome.thread_count);
        if (IS("window")) return testing_int(f->u.welcome.window);
        if (IS("max_frame")) return testing_int(f->u.welcome.max_frame);
        if (IS("timeout_async")) return testing_int(f->u.welcome.timeout_async);
        if (IS("timeout_sync")) return testing_int(f->u.welcome.timeout_sync);
        if (IS("timeout_terminate")) return testing_int(f->u.welcome.timeout_terminate);
        if (IS("priority_default")) return testing_int(f->u.welcome.priority_default);
        if (IS("keepalive")) return testing_int(f->u.welcome.keepalive);
        if (IS("prefix")) return STR(f->u.welcome.prefix);
        break;
    case CUMULO_FRAME_REQUEST:
        if (IS("trans_id")) return TID(f->u.request.trans_id);
        if (IS("timeout")) return testing_int(f->u.request.timeout);
        if (IS("priority")) return testing_int(f->u.request.priority);
        if (IS("flags")) return testing_int(f->u.request.flags);
        if (IS("source")) return testing_num(f->u.request.source, 0);
        if (IS("name")) return STR(f->u.request.name);
        if (IS("pattern")) return STR(f->u.request.pattern);
        if (IS("request_info")) return BYTES(f->u.request.request_info);
        if (IS("request")) return BYTES(f->u.request.request);
        break;
    case CUMULO_FRAME_REPLY:
        if (IS("req_id")) return testing_int(f->u.reply.req_id);
        if (IS("status")) return testing_int(f->u.reply.status);
        if (IS("value")) return testing_int(f->u.reply.value);
        if (IS("message")) return STR(f->u.reply.message);
        break;
    case CUMULO_FRAME_MCAST_SENT:
        if (IS("trans_id")) return TID(f->u.mcast_sent.trans_id);
        if (IS("trans_ids")) {
            size_t n = f->u.mcast_sent.count;
            char *s = malloc(33 * n + 1);
            if (!s) abort();
            s[0] = 0;
            for (size_t i = 0; i < n; i++) {
                char *h = testing_hex(f->u.mcast_sent.trans_ids + 16 * i, 16);
                if (i) strcat(s, ",");
                strcat(s, h);
                free(h);
            }
            return s;
        }
        break;
    case CUMULO_FRAME_TERMINATE:
        if (IS("timeout")) return testing_int(f->u.terminate.timeout);
        break;
    case CUMULO_FRAME_ERROR:
        if (IS("status")) return testing_int(f->u.error.status);
        if (IS("message")) return STR(f->u.error.message);
        break;
    }
    return strdup("?");
#undef IS
#undef STR
#undef BYTES
#undef TID
}

static const char *testing_type_name(int type) {
    switch (type) {
    case 0x01: return "HELLO"; case 0x02: return "SUBSCRIBE"; case 0x03: return "UNSUBSCRIBE";
    case 0x04: return "SUBSCRIBE_COUNT"; case 0x10: return "SEND_ASYNC"; case 0x11: return "SEND_SYNC";
    case 0x12: return "MCAST_ASYNC"; case 0x20: return "RETURN"; case 0x21: return "FORWARD";
    case 0x30: return "PING"; case 0x31: return "PONG"; case 0x32: return "GOODBYE";
    case 0x81: return "WELCOME"; case 0x82: return "REQUEST"; case 0x83: return "RESPONSE";
    case 0x84: return "REPLY"; case 0x85: return "MCAST_SENT"; case 0x86: return "TERMINATE";
    case 0x87: return "ERROR";
    }
    return "?";
}

/* ---- one decoded frame at a time (the tests are single-threaded) */

static cumulo_frame testing_frame;
static uint8_t *testing_frame_bytes;
static size_t testing_frame_len;

/* Decodes one whole frame from hex; the status (0, MALFORMED, TOO_LARGE). */
static int testing_decode_hex(const char *hex, unsigned max_frame) {
    free(testing_frame_bytes);
    size_t n = strlen(hex) / 2;
    testing_frame_bytes = malloc(n + 1);
    if (!testing_frame_bytes) abort();
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        testing_frame_bytes[i] = (uint8_t)v;
    }
    testing_frame_len = n;
    memset(&testing_frame, 0, sizeof testing_frame);
    return cumulo_frame_decode(testing_frame_bytes, n, max_frame, &testing_frame);
}
static int testing_type(void) { return testing_frame.type; }
static char *testing_type_of_frame(void) { return (char *)testing_type_name(testing_frame.type); }
static char *testing_field(const char *name) { return testing_frame_field(&testing_frame, name); }
/* The decoded frame encoded again, in hex ("" if it cannot be). */
static char *testing_reencode_hex(void) {
    size_t size = cumulo_frame_size(&testing_frame), written = 0;
    uint8_t *out = malloc(size + 1);
    if (!out) abort();
    char *hex = cumulo_frame_encode(&testing_frame, out, size, &written) == CUMULO_OK ? testing_hex(out, written) : strdup("");
    free(out);
    return hex;
}

/* ---- the fake core: the other end of a socketpair */

static int testing_peer = -1;

/* A socketpair: returns the instance's end; the core's end is kept here. */
static int testing_socketpair(void) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) abort();
    if (testing_peer >= 0) close(testing_peer);
    testing_peer = fds[1];
    return fds[0];
}

static void testing_send(const cumulo_frame *f) {
    size_t size = cumulo_frame_size(f), written = 0;
    uint8_t *out = malloc(size);
    if (!out || cumulo_frame_encode(f, out, size, &written) != CUMULO_OK) abort();
    for (size_t off = 0; off < written;) {
        ssize_t n = write(testing_peer, out + off, written - off);
        if (n <= 0) abort();
        off += (size_t)n;
    }
    free(out);
}

static cumulo_str testing_str(const char *s) { cumulo_str r = {s, strlen(s)}; return r; }
static cumulo_bytes testing_bytes(const char *s) { cumulo_bytes r = {(const uint8_t *)s, strlen(s)}; return r; }
static cumulo_trans_id testing_tid(int last) {
    cumulo_trans_id t;
    memset(&t, 0, sizeof t);
    t.bytes[15] = (uint8_t)last;
    return t;
}

static void testing_send_welcome(unsigned max_frame) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_WELCOME;
    f.u.welcome.version = 1;
    f.u.welcome.node_id = 1;
    f.u.welcome.instance_id = 7;
    f.u.welcome.process_count = 1;
    f.u.welcome.thread_count = 1;
    f.u.welcome.window = 1;
    f.u.welcome.max_frame = max_frame;
    f.u.welcome.timeout_async = 5000;
    f.u.welcome.timeout_sync = 5000;
    f.u.welcome.timeout_terminate = 2000;
    f.u.welcome.priority_default = -2;
    f.u.welcome.keepalive = 5000;
    f.u.welcome.prefix = testing_str("/tests/");
    testing_send(&f);
}
static void testing_send_reply(unsigned req_id, int status, unsigned value) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_REPLY;
    f.u.reply.req_id = req_id;
    f.u.reply.status = (uint16_t)status;
    f.u.reply.value = value;
    f.u.reply.message = testing_str(status ? "refused" : "");
    testing_send(&f);
}
static void testing_send_request(int tid, const char *pattern, const char *body) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_REQUEST;
    f.u.request.trans_id = testing_tid(tid);
    f.u.request.timeout = 5000;
    f.u.request.flags = CUMULO_REQUEST_SYNC;
    f.u.request.source = 42;
    f.u.request.name = testing_str(pattern);
    f.u.request.pattern = testing_str(pattern);
    f.u.request.request = testing_bytes(body);
    testing_send(&f);
}
/* A REQUEST as testing_send_request, with a request_info. */
static void testing_send_request_info(int tid, const char *pattern, cumulo_bytes info, const char *body) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_REQUEST;
    f.u.request.trans_id = testing_tid(tid);
    f.u.request.timeout = 5000;
    f.u.request.flags = CUMULO_REQUEST_SYNC;
    f.u.request.source = 42;
    f.u.request.name = testing_str(pattern);
    f.u.request.pattern = testing_str(pattern);
    f.u.request.request_info = info;
    f.u.request.request = testing_bytes(body);
    testing_send(&f);
}
static void testing_send_ping(unsigned long long nonce) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_PING;
    f.u.ping.nonce = nonce;
    testing_send(&f);
}
static void testing_send_terminate(void) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_TERMINATE;
    f.u.terminate.timeout = 1000;
    testing_send(&f);
}
/* A RESPONSE to the trans_id (hex) of the frame read last. */
static void testing_send_response_to_last(int status, const char *body) {
    cumulo_frame f;
    memset(&f, 0, sizeof f);
    f.type = CUMULO_FRAME_RESPONSE;
    f.u.answer.trans_id = testing_frame.u.send.trans_id;
    f.u.answer.status = (uint16_t)status;
    f.u.answer.response = testing_bytes(body);
    testing_send(&f);
}

/* Reads the next frame the instance wrote (within 2 s) into the current
 * frame; its type, or -1 on EOF or timeout. */
static int testing_recv(void) {
    uint8_t head[4];
    size_t got = 0;
    while (got < 4) {
        struct pollfd p = {testing_peer, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) return -1;
        ssize_t n = read(testing_peer, head + got, 4 - got);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    size_t len = (size_t)head[0] | (size_t)head[1] << 8 | (size_t)head[2] << 16 | (size_t)head[3] << 24;
    free(testing_frame_bytes);
    testing_frame_bytes = malloc(len + 4);
    if (!testing_frame_bytes) abort();
    memcpy(testing_frame_bytes, head, 4);
    for (got = 0; got < len;) {
        struct pollfd p = {testing_peer, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) return -1;
        ssize_t n = read(testing_peer, testing_frame_bytes + 4 + got, len - got);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    testing_frame_len = len + 4;
    memset(&testing_frame, 0, sizeof testing_frame);
    if (cumulo_frame_decode(testing_frame_bytes, testing_frame_len, UINT32_MAX, &testing_frame) != CUMULO_OK) return -1;
    return testing_frame.type;
}

/* True once the instance closed its end (what it still wrote is skipped). */
static int testing_peer_closed(void) {
    uint8_t buf[4096];
    for (;;) {
        struct pollfd p = {testing_peer, POLLIN, 0};
        if (poll(&p, 1, 2000) <= 0) return 0;
        ssize_t n = read(testing_peer, buf, sizeof buf);
        if (n == 0) return 1;
        if (n < 0) return 0;
    }
}

/* ---- key/value vectors: hex in, (key, value) hex pairs out */
static cumulo_bytes testing_kv_bytes;
static int testing_kv_decode_hex(const char *hex) {
    free((void *)testing_kv_bytes.data);
    size_t n = strlen(hex) / 2;
    uint8_t *b = malloc(n + 1);
    if (!b) abort();
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (uint8_t)v;
    }
    testing_kv_bytes.data = b;
    testing_kv_bytes.len = n;
    return cumulo_kv_validate(b, n, NULL);
}
static cumulo_bytes testing_kv_current(void) { return testing_kv_bytes; }


/* ---- counting checks, and reading the vector lines */

static int testing_passed, testing_failed;
static void testing_check(int ok, const char *what) {
    if (ok) {
        testing_passed++;
    } else {
        testing_failed++;
        printf("FAIL %s\n", what);
    }
}
static int testing_summary(void) {
    printf("%d passed, %d failed\n", testing_passed, testing_failed);
    return testing_failed == 0 ? 0 : 1;
}

static FILE *testing_lines;
static char *testing_cols[64];
static int testing_ncols;
static char testing_line[1 << 16];
static int testing_open(const char *path) { return (testing_lines = fopen(path, "r")) != NULL; }
/* The next line split at tabs: its number of columns, or 0 at the end. */
static int testing_next_line(void) {
    if (!testing_lines || !fgets(testing_line, sizeof testing_line, testing_lines)) return 0;
    testing_line[strcspn(testing_line, "\n")] = 0;
    testing_ncols = 0;
    for (char *rest = testing_line, *tok; (tok = strsep(&rest, "\t")) != NULL && testing_ncols < 64;)
        testing_cols[testing_ncols++] = tok; /* empty columns (an empty hex) are kept */
    return testing_ncols;
}
static char *testing_col(int i) { return i < testing_ncols ? testing_cols[i] : (char *)""; }
/* "key=value" column i: the part before or after the first '='. */
static char *testing_col_key(int i) {
    const char *c = testing_col(i), *eq = strchr(c, '=');
    return strndup(c, eq ? (size_t)(eq - c) : strlen(c));
}
static char *testing_col_value(int i) {
    const char *eq = strchr(testing_col(i), '=');
    return (char *)(eq ? eq + 1 : "");
}
static char *testing_big_string(int n) {
    char *s = malloc((size_t)n + 1);
    if (!s) abort();
    memset(s, 'x', (size_t)n);
    s[n] = 0;
    return s;
}
static int testing_streq(const char *a, const char *b) { return strcmp(a, b) == 0; }
static char *testing_concat(const char *a, const char *b) {
    char *s = malloc(strlen(a) + strlen(b) + 1);
    if (!s) abort();
    strcpy(s, a);
    strcat(s, b);
    return s;
}

#endif /* CUMULO_ATS_TESTING_CATS */
