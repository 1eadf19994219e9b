/* relay: the least work a correct cumulo broker must do, as a yardstick.
 *
 * One thread, one epoll set, level-triggered. It speaks enough of protocol v1
 * that the very same clients talk to it or to the cumulo core: HELLO/WELCOME,
 * exact-name subscriptions, SEND -> REQUEST (round robin, per-receiver window
 * and FIFO), RETURN -> RESPONSE, PING -> PONG. No timeouts, priorities,
 * wildcards or supervision: whatever the core spends on those shows up as the
 * distance between the two.
 *
 * Costs kept to the minimum: frames are parsed in place from a large read
 * buffer, each message is copied once (into the destination's output buffer),
 * and output is flushed once per epoll wakeup so many frames share a write.
 */
#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire.h"

#define NODE_ID 1
#define MAX_WINDOW 1024
#define MAX_FRAME DEFAULT_MAX_FRAME
#define READ_BUF (256 * 1024)
#define LISTENER_TAG UINT64_MAX

/* A REQUEST frame waiting for a slot in its receiver's window. */
struct queued { struct queued *next; size_t len; uint8_t frame[]; };

struct conn {
    int fd;
    uint32_t serial;          /* tells a reused fd apart in stale epoll events */
    uint32_t iid;             /* instance_id, 0 until WELCOME */
    uint32_t window, inflight;
    uint8_t *prefix; uint16_t prefix_len;
    uint8_t *in; size_t in_len, in_cap;
    struct buf out; size_t out_off;
    int dirty, want_out;
    struct queued *q_head, *q_tail;
};

/* Subscribers of one exact name; an instance appears once per subscription,
 * which doubles its share of round robin as PROTOCOL 4.1 asks. */
struct service { uint8_t *name; uint16_t len; uint32_t n, cap, rr; int *fds; };

/* A request delivered or queued, waiting for its RETURN. */
struct pending { uint8_t tid[TID_LEN]; int used, sender_fd; uint32_t sender_iid, recv_iid; };

static int epfd;
static struct conn **conns;            /* indexed by fd */
static size_t conns_cap;
static uint32_t next_serial = 1, next_iid = 1;
static int *dirty; static size_t dirty_n, dirty_cap;
static struct service **svcs; static size_t svcs_cap = 64, svcs_n;
static struct pending *pend; static size_t pend_cap = 1024, pend_n;

/* ---- hashing ------------------------------------------------------------ */

static uint64_t hash_bytes(const uint8_t *p, size_t n)   /* FNV-1a */
{
    uint64_t h = 1469598103934665603ull;
    while (n--) h = (h ^ *p++) * 1099511628211ull;
    return h;
}

/* trans_ids already carry nanoseconds in their first half: mixing the two
 * halves with a multiply is enough and far cheaper than hashing 16 bytes. */
static size_t tid_slot(const uint8_t *tid, size_t cap)
{
    uint64_t a, b;
    memcpy(&a, tid, 8); memcpy(&b, tid + 8, 8);
    return (size_t)(((a ^ (b * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull) >> 17) & (cap - 1);
}

static struct service **svc_slot(const uint8_t *name, uint16_t len)
{
    size_t i = hash_bytes(name, len) & (svcs_cap - 1);
    while (svcs[i] && !(svcs[i]->len == len && memcmp(svcs[i]->name, name, len) == 0))
        i = (i + 1) & (svcs_cap - 1);
    return &svcs[i];
}

static struct service *svc_get(const uint8_t *name, uint16_t len, int create)
{
    struct service **slot = svc_slot(name, len);
    if (*slot || !create) return *slot;
    struct service *s = calloc(1, sizeof *s);
    s->name = xrealloc(NULL, len ? len : 1);
    memcpy(s->name, name, len);
    s->len = len;
    *slot = s;
    if (++svcs_n * 2 > svcs_cap) {        /* names are few: grow, never delete */
        struct service **old = svcs; size_t old_cap = svcs_cap;
        svcs_cap *= 2;
        svcs = calloc(svcs_cap, sizeof *svcs);
        for (size_t i = 0; i < old_cap; i++)
            if (old[i]) *svc_slot(old[i]->name, old[i]->len) = old[i];
        free(old);
    }
    return s;
}

static struct pending *pend_find(const uint8_t *tid)
{
    for (size_t i = tid_slot(tid, pend_cap); pend[i].used; i = (i + 1) & (pend_cap - 1))
        if (memcmp(pend[i].tid, tid, TID_LEN) == 0) return &pend[i];
    return NULL;
}

static struct pending *pend_insert(const uint8_t *tid)
{
    if ((pend_n + 1) * 2 > pend_cap) {
        struct pending *old = pend; size_t old_cap = pend_cap;
        pend_cap *= 2;
        pend = calloc(pend_cap, sizeof *pend);
        pend_n = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].used) *pend_insert(old[i].tid) = old[i];
        free(old);
    }
    size_t i = tid_slot(tid, pend_cap);
    while (pend[i].used) i = (i + 1) & (pend_cap - 1);
    memcpy(pend[i].tid, tid, TID_LEN);
    pend[i].used = 1;
    pend_n++;
    return &pend[i];
}

/* Linear probing with backward-shift deletion: no tombstones, so lookups stay
 * short however many requests have come and gone. */
static void pend_delete(struct pending *e)
{
    size_t hole = (size_t)(e - pend), i = hole;
    pend[hole].used = 0;
    pend_n--;
    for (;;) {
        i = (i + 1) & (pend_cap - 1);
        if (!pend[i].used) return;
        size_t home = tid_slot(pend[i].tid, pend_cap);
        /* move it back unless its home lies cyclically in (hole, i] */
        if (((i - home) & (pend_cap - 1)) >= ((i - hole) & (pend_cap - 1))) {
            pend[hole] = pend[i];
            pend[i].used = 0;
            hole = i;
        }
    }
}

/* ---- output ------------------------------------------------------------- */

static struct conn *live(int fd, uint32_t iid)
{
    return fd >= 0 && (size_t)fd < conns_cap && conns[fd] && conns[fd]->iid == iid ? conns[fd] : NULL;
}

/* Frames only accumulate here; flush_all() writes them after the wakeup. */
static struct buf *out_of(struct conn *c)
{
    if (!c->dirty) {
        c->dirty = 1;
        if (dirty_n == dirty_cap) dirty = xrealloc(dirty, (dirty_cap = dirty_cap ? dirty_cap * 2 : 64) * sizeof *dirty);
        dirty[dirty_n++] = c->fd;
    }
    return &c->out;
}

static void send_reply(struct conn *c, uint32_t req_id, uint16_t status, uint32_t value, const char *msg)
{
    struct buf *b = out_of(c);
    size_t f = frame_begin(b, F_REPLY);
    put_u32(b, req_id); put_u16(b, status); put_u32(b, value);
    put_str(b, msg, (uint16_t)strlen(msg));
    frame_end(b, f);
}

/* An error RESPONSE to whoever sent trans_id, if still connected. */
static void send_failure(int fd, uint32_t iid, const uint8_t *tid, uint16_t status, const char *msg)
{
    struct conn *s = live(fd, iid);
    if (!s) return;
    struct buf *b = out_of(s);
    size_t f = frame_begin(b, F_RESPONSE);
    put_raw(b, tid, TID_LEN); put_u16(b, status); put_u32(b, 0);
    put_bytes(b, msg, (uint32_t)strlen(msg));
    frame_end(b, f);
}

static void close_conn(struct conn *c);

/* Writes what it can; EPOLLOUT is only asked for while something is left,
 * since level-triggered EPOLLOUT on an idle socket would spin. */
static void flush_conn(struct conn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = write(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
        if (n > 0) { c->out_off += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_conn(c);                        /* peer gone */
        return;
    }
    int pending_out = c->out_off < c->out.len;
    if (!pending_out) c->out_off = c->out.len = 0;
    if (pending_out != c->want_out) {
        struct epoll_event ev = { .events = EPOLLIN | (pending_out ? EPOLLOUT : 0),
                                  .data.u64 = (uint64_t)c->serial << 32 | (uint32_t)c->fd };
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = pending_out;
    }
}

static void flush_all(void)
{
    /* close_conn may mark more connections dirty: dirty_n is re-read */
    for (size_t i = 0; i < dirty_n; i++) {
        struct conn *c = (size_t)dirty[i] < conns_cap ? conns[dirty[i]] : NULL;
        if (c && c->dirty) { c->dirty = 0; flush_conn(c); }
    }
    dirty_n = 0;
}

/* ---- connection lifetime ------------------------------------------------ */

static void unsubscribe_all(struct conn *c)
{
    for (size_t i = 0; i < svcs_cap; i++) {
        struct service *s = svcs[i];
        if (!s) continue;
        uint32_t k = 0;
        for (uint32_t j = 0; j < s->n; j++)
            if (s->fds[j] != c->fd) s->fds[k++] = s->fds[j];
        s->n = k;
    }
}

/* Every request this instance held, delivered or queued, ends in CRASHED:
 * nothing is dropped silently. Rare, so a full scan is fine. */
static void close_conn(struct conn *c)
{
    unsubscribe_all(c);
    for (struct queued *q = c->q_head, *next; q; q = next) { next = q->next; free(q); }
    if (c->iid) {
        for (size_t i = 0; i < pend_cap;) {
            if (pend[i].used && pend[i].recv_iid == c->iid) {
                send_failure(pend[i].sender_fd, pend[i].sender_iid, pend[i].tid, S_CRASHED,
                             "the instance handling the request went away");
                pend_delete(&pend[i]);        /* may move another entry into i */
            } else {
                i++;
            }
        }
    }
    close(c->fd);                             /* also leaves the epoll set */
    conns[c->fd] = NULL;
    free(c->in); free(c->out.data); free(c->prefix); free(c);
}

/* Connection-level error: ERROR, best-effort write, close (PROTOCOL 3). */
static void fail_conn(struct conn *c, uint16_t status, const char *msg)
{
    struct buf *b = &c->out;
    size_t f = frame_begin(b, F_ERROR);
    put_u16(b, status); put_str(b, msg, (uint16_t)strlen(msg));
    frame_end(b, f);
    if (write(c->fd, b->data + c->out_off, b->len - c->out_off) < 0) { /* closing anyway */ }
    close_conn(c);
}

static void accept_all(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;                   /* EAGAIN, or out of fds: retry on next wakeup */
        if ((size_t)fd >= conns_cap) {
            size_t cap = conns_cap ? conns_cap : 256;
            while (cap <= (size_t)fd) cap *= 2;
            conns = xrealloc(conns, cap * sizeof *conns);
            memset(conns + conns_cap, 0, (cap - conns_cap) * sizeof *conns);
            conns_cap = cap;
        }
        struct conn *c = calloc(1, sizeof *c);
        c->fd = fd;
        c->serial = next_serial++;
        c->in = xrealloc(NULL, c->in_cap = READ_BUF);
        conns[fd] = c;
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)c->serial << 32 | (uint32_t)fd };
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* ---- routing ------------------------------------------------------------ */

/* Moves queued requests into the window as RETURNs free it. */
static void pump(struct conn *r)
{
    while (r->inflight < r->window && r->q_head) {
        struct queued *q = r->q_head;
        put_raw(out_of(r), q->frame, q->len);
        if (!(r->q_head = q->next)) r->q_tail = NULL;
        free(q);
        r->inflight++;
    }
}

/* SEND_ASYNC / SEND_SYNC: layout shared with REQUEST except that REQUEST adds
 * source after flags and pattern after name, so it is three copies. */
static int on_send(struct conn *c, uint8_t type, const uint8_t *body, size_t len)
{
    struct rd r = { body, body + len, 0 };
    const uint8_t *tid = rd_take(&r, TID_LEN);
    rd_take(&r, 4 + 1 + 1);                   /* timeout, priority, flags: passed through */
    uint16_t name_len; uint32_t info_len, req_len;
    const uint8_t *name = rd_str(&r, &name_len);
    const uint8_t *rest = r.p;
    rd_bytes(&r, &info_len); rd_bytes(&r, &req_len);
    if (!rd_ok(&r) || !utf8_valid(name, name_len)) return -1;

    if (get_u32be(tid + 8) != NODE_ID || get_u32be(tid + 12) != c->iid) {
        send_failure(c->fd, c->iid, tid, S_MALFORMED, "trans_id does not carry this instance's node_id and instance_id");
        return 0;
    }
    if (type == F_MCAST_ASYNC) {
        send_failure(c->fd, c->iid, tid, S_INVALID_ARGUMENT, "MCAST_ASYNC is not supported by the relay");
        return 0;
    }
    if (name_len == 0) {
        send_failure(c->fd, c->iid, tid, S_INVALID_ARGUMENT, "empty service name");
        return 0;
    }
    struct service *s = svc_get(name, name_len, 0);
    if (!s || s->n == 0) {
        send_failure(c->fd, c->iid, tid, S_NO_SERVICE, "no instance subscribes this name");
        return 0;
    }
    if (pend_find(tid)) {
        send_failure(c->fd, c->iid, tid, S_MALFORMED, "trans_id already in use");
        return 0;
    }
    struct conn *dest = conns[s->fds[s->rr++ % s->n]];
    struct pending *p = pend_insert(tid);
    p->sender_fd = c->fd; p->sender_iid = c->iid; p->recv_iid = dest->iid;

    /* Encode straight into the receiver's output; if its window is full,
     * move the bytes into its queue instead (the rarer path pays the copy). */
    struct buf *b = out_of(dest);
    size_t f = frame_begin(b, F_REQUEST);
    put_raw(b, body, TID_LEN + 6);
    if (type == F_SEND_SYNC) b->data[b->len - 1] = 1;   /* REQUEST flags: SYNC */
    else b->data[b->len - 1] = 0;
    put_u64(b, (uint64_t)NODE_ID << 32 | c->iid);       /* source */
    put_str(b, name, name_len);
    put_str(b, name, name_len);                         /* pattern: exact, so the name */
    put_raw(b, rest, (size_t)(body + len - rest));      /* request_info, request */
    frame_end(b, f);
    if (dest->inflight < dest->window) {
        dest->inflight++;
    } else {
        size_t n = b->len - f;
        struct queued *q = xrealloc(NULL, sizeof *q + n);
        q->next = NULL; q->len = n;
        memcpy(q->frame, b->data + f, n);
        b->len = f;
        if (dest->q_tail) dest->q_tail->next = q; else dest->q_head = q;
        dest->q_tail = q;
    }
    return 0;
}

/* RETURN has exactly the body of RESPONSE: forward the frame, retyped. */
static int on_return(struct conn *c, const uint8_t *frame, size_t len, int forward)
{
    struct rd r = { frame + 5, frame + 4 + len, 0 };
    const uint8_t *tid = rd_take(&r, TID_LEN);
    uint16_t name_len; uint32_t n1, n2;
    if (forward) { rd_take(&r, 6); rd_str(&r, &name_len); } else rd_u16(&r);
    rd_bytes(&r, &n1); rd_bytes(&r, &n2);
    if (!rd_ok(&r)) return -1;
    struct pending *p = pend_find(tid);
    if (!p || p->recv_iid != c->iid) return 0;          /* not ours, or already failed: discard */
    if (forward) {
        send_failure(p->sender_fd, p->sender_iid, tid, S_INVALID_ARGUMENT, "FORWARD is not supported by the relay");
    } else {
        struct conn *s = live(p->sender_fd, p->sender_iid);
        if (s) {
            struct buf *b = out_of(s);
            size_t at = b->len;
            put_raw(b, frame, 4 + len);
            b->data[at + 4] = F_RESPONSE;
        }
    }
    pend_delete(p);
    c->inflight--;
    pump(c);
    return 0;
}

static int on_control(struct conn *c, uint8_t type, const uint8_t *body, size_t len)
{
    struct rd r = { body, body + len, 0 };
    uint32_t req_id = rd_u32(&r);
    uint16_t plen;
    const uint8_t *pat = rd_str(&r, &plen);
    if (!rd_ok(&r) || !utf8_valid(pat, plen)) return -1;
    if (memchr(pat, '*', plen) || memchr(pat, '?', plen)) {
        send_reply(c, req_id, S_INVALID_ARGUMENT, 0, "wildcards are not supported by the relay");
        return 0;
    }
    if ((size_t)c->prefix_len + plen > UINT16_MAX) {
        send_reply(c, req_id, S_INVALID_ARGUMENT, 0, "name too long");
        return 0;
    }
    uint8_t full[UINT16_MAX];
    memcpy(full, c->prefix, c->prefix_len);
    memcpy(full + c->prefix_len, pat, plen);
    struct service *s = svc_get(full, (uint16_t)(c->prefix_len + plen), type == F_SUBSCRIBE);
    uint32_t count = 0, at = 0;
    for (uint32_t j = 0; s && j < s->n; j++)
        if (s->fds[j] == c->fd) { count++; at = j; }
    if (type == F_SUBSCRIBE) {
        if (s->n == s->cap) s->fds = xrealloc(s->fds, (s->cap = s->cap ? s->cap * 2 : 4) * sizeof *s->fds);
        s->fds[s->n++] = c->fd;
        send_reply(c, req_id, S_OK, 0, "");
    } else if (type == F_UNSUBSCRIBE) {
        if (!count) { send_reply(c, req_id, S_INVALID_ARGUMENT, 0, "pattern not subscribed"); return 0; }
        s->fds[at] = s->fds[--s->n];
        send_reply(c, req_id, S_OK, 0, "");
    } else {
        send_reply(c, req_id, S_OK, count, "");
    }
    return 0;
}

static int on_hello(struct conn *c, const uint8_t *body, size_t len)
{
    struct rd r = { body, body + len, 0 };
    uint16_t version = rd_u16(&r);
    uint32_t window = rd_u32(&r);
    rd_u32(&r);                               /* thread_index: one instance per connection anyway */
    uint16_t token_len, prefix_len;
    const uint8_t *token = rd_str(&r, &token_len);
    const uint8_t *prefix = rd_str(&r, &prefix_len);
    if (!rd_ok(&r) || !utf8_valid(token, token_len) || !utf8_valid(prefix, prefix_len)) {
        fail_conn(c, S_MALFORMED, "malformed HELLO");
        return -1;
    }
    if (version < 1) { fail_conn(c, S_UNSUPPORTED_VERSION, "the relay speaks protocol version 1"); return -1; }
    if (token_len) { fail_conn(c, S_UNAUTHORIZED, "the relay takes unmanaged instances only (empty token)"); return -1; }
    if (prefix_len == 0 || prefix[0] != '/') { fail_conn(c, S_INVALID_ARGUMENT, "prefix must start with /"); return -1; }

    c->iid = next_iid++;
    c->window = window == 0 ? 1 : window > MAX_WINDOW ? MAX_WINDOW : window;
    c->prefix = xrealloc(NULL, prefix_len);
    memcpy(c->prefix, prefix, prefix_len);
    c->prefix_len = prefix_len;

    struct buf *b = out_of(c);
    size_t f = frame_begin(b, F_WELCOME);
    put_u16(b, 1); put_u32(b, NODE_ID); put_u32(b, c->iid);
    put_u32(b, 0); put_u32(b, 1); put_u32(b, 1);         /* process index/count, thread count */
    put_u32(b, c->window); put_u32(b, MAX_FRAME);
    put_u32(b, 5000); put_u32(b, 5000); put_u32(b, 2000); /* timeouts: told, never enforced */
    put_u8(b, 0); put_u32(b, 5000);                       /* priority, keepalive */
    put_str(b, prefix, prefix_len);
    frame_end(b, f);
    return 0;
}

/* Returns -1 when the connection has been (or must be) closed. */
static int on_frame(struct conn *c, const uint8_t *frame, size_t len)
{
    uint8_t type = frame[4];
    const uint8_t *body = frame + 5;
    size_t blen = len - 1;
    if (!c->iid) {
        if (type == F_HELLO) return on_hello(c, body, blen);
        fail_conn(c, S_PROTOCOL, "HELLO must come first");
        return -1;
    }
    int rc;
    switch (type) {
    case F_SEND_ASYNC: case F_SEND_SYNC: case F_MCAST_ASYNC: rc = on_send(c, type, body, blen); break;
    case F_RETURN: rc = on_return(c, frame, len, 0); break;
    case F_FORWARD: rc = on_return(c, frame, len, 1); break;
    case F_SUBSCRIBE: case F_UNSUBSCRIBE: case F_SUBSCRIBE_COUNT: rc = on_control(c, type, body, blen); break;
    case F_PING: case F_PONG:
        if (blen != 8) { rc = -1; break; }
        if (type == F_PING) {
            struct buf *b = out_of(c);
            size_t at = b->len;
            put_raw(b, frame, 4 + len);
            b->data[at + 4] = F_PONG;
        }
        rc = 0;
        break;
    case F_GOODBYE:
        if (blen) { rc = -1; break; }
        unsubscribe_all(c);                   /* no new work; held requests fail on close */
        rc = 0;
        break;
    case F_HELLO: fail_conn(c, S_PROTOCOL, "HELLO sent twice"); return -1;
    default: rc = -1;
    }
    if (rc < 0) fail_conn(c, S_MALFORMED, "malformed or unknown frame");
    return rc;
}

/* One read per wakeup (level-triggered: the rest comes on the next one, which
 * keeps connections fair), then every complete frame is handled in place. */
static void on_readable(struct conn *c)
{
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) { close_conn(c); return; }
    c->in_len += (size_t)n;
    size_t off = 0;
    while (c->in_len - off >= 4) {
        uint32_t len = get_u32le(c->in + off);
        if (len == 0) { fail_conn(c, S_MALFORMED, "zero-length frame"); return; }
        if (len > MAX_FRAME) { fail_conn(c, S_TOO_LARGE, "frame over max_frame"); return; }
        if (c->in_len - off < 4 + (size_t)len) {
            if (4 + (size_t)len > c->in_cap) {       /* a big frame: make room for all of it */
                memmove(c->in, c->in + off, c->in_len - off);
                c->in_len -= off; off = 0;
                c->in = xrealloc(c->in, c->in_cap = 4 + (size_t)len);
            }
            break;
        }
        if (on_frame(c, c->in + off, len) < 0) return;
        off += 4 + (size_t)len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
}

static const char *socket_path;

static void on_term(int sig)
{
    (void)sig;
    unlink(socket_path);                      /* async-signal-safe, unlike exit() */
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: relay SOCKET_PATH\n"); return 2; }
    socket_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof addr.sun_path) { fprintf(stderr, "relay: socket path too long\n"); return 2; }
    strcpy(addr.sun_path, argv[1]);
    unlink(argv[1]);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 1024) < 0) {
        perror("relay: listen");
        return 1;
    }
    svcs = calloc(svcs_cap, sizeof *svcs);
    pend = calloc(pend_cap, sizeof *pend);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = LISTENER_TAG }, evs[256];
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    fprintf(stderr, "relay: listening on %s\n", argv[1]);

    for (;;) {
        int n = epoll_wait(epfd, evs, 256, -1);
        if (n < 0) { if (errno == EINTR) continue; perror("relay: epoll_wait"); return 1; }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == LISTENER_TAG) { accept_all(lfd); continue; }
            int fd = (int)(uint32_t)evs[i].data.u64;
            struct conn *c = (size_t)fd < conns_cap ? conns[fd] : NULL;
            if (!c || c->serial != (uint32_t)(evs[i].data.u64 >> 32)) continue;  /* closed in this batch */
            if (evs[i].events & EPOLLOUT) flush_conn(c);
            if (conns[fd] != c) continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
        }
        flush_all();
    }
}
