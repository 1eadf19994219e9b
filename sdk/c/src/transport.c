/* Socket transport: connecting (Unix or TCP), framed reads into the
 * instance's reusable read buffer, and whole-frame writes; over TLS the bytes
 * go through tls.c instead of recv/send. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_BUFFER_INITIAL (64u * 1024u)
#define TLS_RECORD_MAX 16384u /* plaintext bytes in one TLS record */

int cumulo__vfail(cumulo_api *api, int status, const char *fmt, va_list args) {
    if (api) vsnprintf(api->error, sizeof api->error, fmt, args);
    return status;
}

int cumulo__fail(cumulo_api *api, int status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    cumulo__vfail(api, status, fmt, args);
    va_end(args);
    return status;
}

int cumulo__close(cumulo_api *api, int status) {
    if (api->fd >= 0) {
        cumulo__tls_free(api, false);
        close(api->fd);
        api->fd = -1;
        api->closed_status = status;
    }
    return status;
}

bool cumulo__grow(growbuf *b, size_t need) {
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *data = realloc(b->data, cap);
    if (!data) return false;
    b->data = data;
    b->cap = cap;
    return true;
}

int64_t cumulo__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t cumulo__deadline(int timeout_ms) {
    return timeout_ms < 0 ? -1 : cumulo__now_ms() + timeout_ms;
}

static int open_tcp(cumulo_api *api, const char *hostport, int *out) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || !colon[1])
        return cumulo__fail(api, CUMULO_E_CONFIG, "socket 'tcp://%s' needs host:port", hostport);
    size_t host_len = (size_t)(colon - hostport);
    if (hostport[0] == '[' && host_len >= 2 && hostport[host_len - 1] == ']') {
        hostport++; /* [IPv6]:port */
        host_len -= 2;
    }
    if (host_len >= sizeof host)
        return cumulo__fail(api, CUMULO_E_CONFIG, "host name too long in 'tcp://%s'", hostport);
    memcpy(host, hostport, host_len);
    host[host_len] = '\0';

    struct addrinfo hints = {0}, *found = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, colon + 1, &hints, &found);
    if (gai != 0)
        return cumulo__fail(api, CUMULO_E_CONFIG, "cannot resolve '%s': %s", host,
                            gai_strerror(gai));
    int err = 0;
    for (struct addrinfo *a = found; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            int one = 1; /* frames are written whole; do not wait to coalesce */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            freeaddrinfo(found);
            *out = fd;
            return CUMULO_OK;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(found);
    return cumulo__fail(api, CUMULO_E_IO, "cannot connect to tcp://%s: %s", hostport,
                        strerror(err));
}

static int open_unix(cumulo_api *api, const char *path, int *out) {
    struct sockaddr_un addr = {0};
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr.sun_path)
        return cumulo__fail(api, CUMULO_E_CONFIG, "socket path too long: %s", path);
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return cumulo__fail(api, CUMULO_E_IO, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int err = errno;
        close(fd);
        return cumulo__fail(api, CUMULO_E_IO, "cannot connect to %s: %s", path, strerror(err));
    }
    *out = fd;
    return CUMULO_OK;
}

int cumulo__open_socket(cumulo_api *api, const char *spec, int *fd) {
    if (!spec || !*spec) return cumulo__fail(api, CUMULO_E_CONFIG, "no socket given (CUMULO_SOCKET)");
    if (strncmp(spec, "tcp://", 6) == 0) return open_tcp(api, spec + 6, fd);
    return open_unix(api, spec, fd);
}

int cumulo__wait_fd(cumulo_api *api, short events, int64_t deadline) {
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - cumulo__now_ms();
            timeout = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p = {api->fd, events, 0};
        int n = poll(&p, 1, timeout);
        if (n > 0) return CUMULO_OK;
        if (n < 0 && errno != EINTR)
            return cumulo__close(api, cumulo__fail(api, CUMULO_E_IO, "poll: %s", strerror(errno)));
        if (n == 0 && deadline >= 0 && cumulo__now_ms() >= deadline) return CUMULO_TIMEOUT;
    }
}

static int write_all(cumulo_api *api, const uint8_t *data, size_t len) {
    if (api->tls) return cumulo__tls_write(api, data, len);
    while (len) {
        ssize_t n = send(api->fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = cumulo__wait_fd(api, POLLOUT, -1);
            if (rc != CUMULO_OK) return rc;
        } else {
            int err = n < 0 ? errno : EPIPE;
            int status = err == EPIPE || err == ECONNRESET ? CUMULO_E_CLOSED : CUMULO_E_IO;
            return cumulo__close(api, cumulo__fail(api, status, "write to core: %s", strerror(err)));
        }
    }
    return CUMULO_OK;
}

static int closed(cumulo_api *api) {
    return cumulo__fail(api, api->closed_status ? api->closed_status : CUMULO_E_CLOSED,
                        "connection to the core is closed (%s)",
                        cumulo_status_name(api->closed_status));
}

int cumulo__send_frame(cumulo_api *api, const cumulo_frame *frame) {
    if (api->fd < 0) return closed(api);
    size_t size = cumulo_frame_size(frame);
    if (size == 0)
        return cumulo__fail(api, CUMULO_INVALID_ARGUMENT,
                            "frame cannot be encoded (string over 65535 bytes or not UTF-8)");
    if (size - 4 > api->max_frame)
        return cumulo__fail(api, CUMULO_TOO_LARGE, "frame of %zu bytes is over the limit of %u",
                            size - 4, api->max_frame);
    if (!cumulo__grow(&api->wbuf, size)) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
    size_t written;
    int rc = cumulo_frame_encode(frame, api->wbuf.data, api->wbuf.cap, &written);
    if (rc != CUMULO_OK) return cumulo__fail(api, rc, "frame cannot be encoded");
    return write_all(api, api->wbuf.data, written);
}

/* Makes room for `need` bytes from rstart, compacting before growing. */
static bool make_room(cumulo_api *api, size_t need) {
    if (api->rstart + need <= api->rbuf.cap) return true;
    size_t pending = api->rend - api->rstart;
    if (api->rstart) {
        memmove(api->rbuf.data, api->rbuf.data + api->rstart, pending);
        api->rstart = 0;
        api->rend = pending;
    }
    if (need < READ_BUFFER_INITIAL) need = READ_BUFFER_INITIAL;
    return cumulo__grow(&api->rbuf, need);
}

int cumulo__read_frame(cumulo_api *api, int64_t deadline, cumulo_frame *frame) {
    /* A REQUEST may exceed max_frame by its source and pattern fields
       (PROTOCOL.md 2): frames from the core are allowed that much more. */
    const uint32_t recv_limit = api->max_frame + CUMULO_REQUEST_OVERHEAD;
    if (api->fd < 0) return closed(api);
    for (;;) {
        if (!make_room(api, 4))
            return cumulo__close(api, cumulo__fail(api, CUMULO_E_NOMEM, "out of memory"));
        const uint8_t *at = api->rbuf.data + api->rstart;
        size_t avail = api->rend - api->rstart;
        size_t frame_len = 4;
        int rc = avail ? cumulo_frame_header(at, avail, recv_limit, &frame_len)
                       : CUMULO_E_INCOMPLETE;
        if (rc == CUMULO_TOO_LARGE)
            return cumulo__close(
                api, cumulo__fail(api, CUMULO_TOO_LARGE,
                                  "core sent a frame of %u bytes, over the limit of %u",
                                  (unsigned)(at[0] | at[1] << 8 | at[2] << 16 | (uint32_t)at[3] << 24),
                                  recv_limit));
        if (rc == CUMULO_MALFORMED)
            return cumulo__close(api, cumulo__fail(api, rc, "core sent a frame of length 0"));
        if (rc == CUMULO_OK && avail >= frame_len) {
            rc = cumulo_frame_decode(at, frame_len, recv_limit, frame);
            api->rstart += frame_len;
            if (api->rstart == api->rend) api->rstart = api->rend = 0;
            if (rc != CUMULO_OK)
                return cumulo__close(api, cumulo__fail(api, rc, "core sent a malformed frame (type 0x%02x)",
                                                       frame->type));
            return CUMULO_OK;
        }
        if (!make_room(api, frame_len))
            return cumulo__close(api, cumulo__fail(api, CUMULO_E_NOMEM, "out of memory"));
        if (api->tls) {
            /* Room for a whole TLS record, so that none is left half read in
               OpenSSL: the socket's readiness (cumulo_fd) then tells all. */
            if (!make_room(api, api->rend - api->rstart + TLS_RECORD_MAX))
                return cumulo__close(api, cumulo__fail(api, CUMULO_E_NOMEM, "out of memory"));
            size_t got = 0;
            rc = cumulo__tls_read(api, api->rbuf.data + api->rend, api->rbuf.cap - api->rend,
                                  deadline, &got);
            if (rc == CUMULO_TIMEOUT) cumulo__fail(api, rc, "nothing arrived before the timeout");
            if (rc != CUMULO_OK) return rc;
            api->rend += got;
            continue;
        }
        rc = cumulo__wait_fd(api, POLLIN, deadline);
        if (rc != CUMULO_OK) {
            if (rc == CUMULO_TIMEOUT) cumulo__fail(api, rc, "nothing arrived before the timeout");
            return rc;
        }
        ssize_t n = recv(api->fd, api->rbuf.data + api->rend, api->rbuf.cap - api->rend, 0);
        if (n > 0) {
            api->rend += (size_t)n;
        } else if (n == 0) {
            return cumulo__close(api, cumulo__fail(api, CUMULO_E_CLOSED, "the core closed the connection"));
        } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return cumulo__close(api, cumulo__fail(api, CUMULO_E_IO, "read from core: %s", strerror(errno)));
        }
    }
}
