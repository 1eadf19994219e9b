#define _POSIX_C_SOURCE 200809L
#include "fake_core.h"

#include "check.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define FAKE_CORE_WAIT_MS 10000

void fc_init(fake_core *fc, int fd) {
    fc->fd = fd;
    fc->buf = NULL;
    fc->len = fc->cap = 0;
}

void fc_close(fake_core *fc) {
    if (fc->fd >= 0) close(fc->fd);
    fc->fd = -1;
    free(fc->buf);
    fc->buf = NULL;
}

/* Reads exactly n more bytes after the ones kept in buf. */
static int read_exact(fake_core *fc, size_t n) {
    if (fc->len + n > fc->cap) {
        fc->cap = fc->len + n;
        fc->buf = realloc(fc->buf, fc->cap);
    }
    while (n) {
        struct pollfd p = {fc->fd, POLLIN, 0};
        int ready = poll(&p, 1, FAKE_CORE_WAIT_MS);
        if (ready == 0) return CUMULO_TIMEOUT;
        if (ready < 0) {
            if (errno == EINTR) continue;
            return CUMULO_E_IO;
        }
        ssize_t got = recv(fc->fd, fc->buf + fc->len, n, 0);
        if (got == 0) return CUMULO_E_CLOSED;
        if (got < 0) {
            if (errno == EINTR) continue;
            return errno == ECONNRESET ? CUMULO_E_CLOSED : CUMULO_E_IO;
        }
        fc->len += (size_t)got;
        n -= (size_t)got;
    }
    return CUMULO_OK;
}

int fc_read(fake_core *fc, cumulo_frame *frame) {
    fc->len = 0;
    int rc = read_exact(fc, 4);
    if (rc != CUMULO_OK) return rc;
    size_t frame_len;
    rc = cumulo_frame_header(fc->buf, 4, CUMULO_DEFAULT_MAX_FRAME, &frame_len);
    if (rc != CUMULO_OK) return rc;
    rc = read_exact(fc, frame_len - 4);
    if (rc != CUMULO_OK) return rc;
    return cumulo_frame_decode(fc->buf, frame_len, CUMULO_DEFAULT_MAX_FRAME, frame);
}

bool fc_expect(fake_core *fc, uint8_t type, cumulo_frame *frame) {
    int rc = fc_read(fc, frame);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "fake core: expected frame 0x%02x, read failed: %s\n", type,
                cumulo_status_name(rc));
        atomic_fetch_add(&check_failures, 1);
        return false;
    }
    if (frame->type != type) {
        fprintf(stderr, "fake core: expected frame 0x%02x, got 0x%02x\n", type, frame->type);
        atomic_fetch_add(&check_failures, 1);
        return false;
    }
    return true;
}

bool fc_eof(fake_core *fc) {
    cumulo_frame frame;
    for (;;) {
        int rc = fc_read(fc, &frame);
        if (rc == CUMULO_E_CLOSED) return true;
        if (rc != CUMULO_OK) return false;
        /* GOODBYE may come first */
        if (frame.type != CUMULO_FRAME_GOODBYE) return false;
    }
}

void fc_send_raw(fake_core *fc, const void *data, size_t len) {
    const uint8_t *p = data;
    while (len) {
        ssize_t n = send(fc->fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "fake core: send failed\n");
            atomic_fetch_add(&check_failures, 1);
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

void fc_send(fake_core *fc, const cumulo_frame *frame) {
    size_t size = cumulo_frame_size(frame), written;
    uint8_t *out = malloc(size);
    CHECK(size > 0 && cumulo_frame_encode(frame, out, size, &written) == CUMULO_OK);
    fc_send_raw(fc, out, size);
    free(out);
}

void fc_handshake(fake_core *fc, const char *prefix, uint32_t max_frame) {
    cumulo_frame hello;
    fc_expect(fc, CUMULO_FRAME_HELLO, &hello);
    fc_welcome(fc, prefix, max_frame);
}

void fc_welcome(fake_core *fc, const char *prefix, uint32_t max_frame) {
    cumulo_frame w = {.type = CUMULO_FRAME_WELCOME};
    w.u.welcome.version = 1;
    w.u.welcome.node_id = 3;
    w.u.welcome.instance_id = 9;
    w.u.welcome.process_index = 0;
    w.u.welcome.process_count = 1;
    w.u.welcome.thread_count = 1;
    w.u.welcome.window = 1;
    w.u.welcome.max_frame = max_frame;
    w.u.welcome.timeout_async = 4000;
    w.u.welcome.timeout_sync = 6000;
    w.u.welcome.timeout_terminate = 2500;
    w.u.welcome.priority_default = 2;
    w.u.welcome.keepalive = 5000;
    w.u.welcome.prefix = (cumulo_str){prefix, strlen(prefix)};
    fc_send(fc, &w);
}

void fc_send_reply(fake_core *fc, uint32_t req_id, uint16_t status, uint32_t value,
                   const char *message) {
    cumulo_frame f = {.type = CUMULO_FRAME_REPLY};
    f.u.reply.req_id = req_id;
    f.u.reply.status = status;
    f.u.reply.value = value;
    f.u.reply.message = (cumulo_str){message, strlen(message)};
    fc_send(fc, &f);
}

void fc_send_request(fake_core *fc, const cumulo_trans_id *tid, const char *name,
                     const char *pattern, const void *info, size_t info_len, const void *body,
                     size_t body_len) {
    cumulo_frame f = {.type = CUMULO_FRAME_REQUEST};
    f.u.request.trans_id = *tid;
    f.u.request.timeout = 3000;
    f.u.request.priority = -1;
    f.u.request.flags = CUMULO_REQUEST_SYNC;
    f.u.request.source = ((uint64_t)3 << 32) | 1;
    f.u.request.name = (cumulo_str){name, strlen(name)};
    f.u.request.pattern = (cumulo_str){pattern, strlen(pattern)};
    f.u.request.request_info = (cumulo_bytes){info, info_len};
    f.u.request.request = (cumulo_bytes){body, body_len};
    fc_send(fc, &f);
}

void fc_send_response(fake_core *fc, const cumulo_trans_id *tid, uint16_t status,
                      const void *info, size_t info_len, const void *body, size_t body_len) {
    cumulo_frame f = {.type = CUMULO_FRAME_RESPONSE};
    f.u.answer.trans_id = *tid;
    f.u.answer.status = status;
    f.u.answer.response_info = (cumulo_bytes){info, info_len};
    f.u.answer.response = (cumulo_bytes){body, body_len};
    fc_send(fc, &f);
}

void fc_send_simple(fake_core *fc, uint8_t type) {
    cumulo_frame f = {.type = type};
    if (type == CUMULO_FRAME_TERMINATE) f.u.terminate.timeout = 1000;
    if (type == CUMULO_FRAME_PING) f.u.ping.nonce = 77;
    fc_send(fc, &f);
}

cumulo_trans_id fc_tid(uint8_t seed) {
    cumulo_trans_id id;
    for (int i = 0; i < 16; i++) id.bytes[i] = (uint8_t)(seed + i);
    id.bytes[12] = id.bytes[13] = id.bytes[14] = id.bytes[15] = 0; /* instance 0: the core */
    return id;
}
