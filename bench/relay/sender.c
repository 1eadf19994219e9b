/* sender: closed-loop load client for any cumulo protocol v1 broker.
 *
 * N unmanaged instances (prefix /bench/), each keeping D SEND_ASYNC requests
 * in flight, all driven by one epoll loop in one thread, so the client costs
 * the same whichever broker it measures. Every answer is checked (status 0,
 * body echoes the value sent) and every round trip after the warm-up is timed.
 * The last line of output is a machine-readable summary.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire.h"

#define MIN_PAYLOAD 32        /* "value\0" + 20 digits + "\0" + "pad\0" + "\0" */
#define READ_BUF (256 * 1024)
#define DRAIN_NS 5000000000ull

struct slot { uint8_t tid[TID_LEN]; uint64_t start_ns, value; int busy; };

struct sconn {
    int fd, idx;
    uint32_t node_id, instance_id, max_frame;
    uint64_t last_tid_ns;
    uint8_t *in; size_t in_len, in_cap;
    struct buf out; size_t out_off; int want_out;
    struct slot *slots; uint32_t inflight;
};

static struct {
    const char *socket, *name, *json;
    int connections, inflight, payload;
    double duration, warmup;
} opt = { NULL, NULL, NULL, 3, 1, 64, 10, 1 };

static int epfd, stopping;
static uint64_t warm_end_ns, end_ns, next_value = 1;
static uint64_t ok_in_window, errors, bad_answers, unanswered;
static uint32_t *lat_us; static size_t lat_n, lat_cap;
static char *pad;

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "sender: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(2);
}

/* PROTOCOL 2.2: time in ns, big-endian, strictly increasing per instance,
 * then our node_id and instance_id (the core checks them). */
static void new_tid(struct sconn *c, uint8_t *tid)
{
    uint64_t ns = now_ns(CLOCK_REALTIME);
    if (ns <= c->last_tid_ns) ns = c->last_tid_ns + 1;
    c->last_tid_ns = ns;
    for (int i = 0; i < 8; i++) tid[i] = (uint8_t)(ns >> (56 - 8 * i));
    for (int i = 0; i < 4; i++) tid[8 + i] = (uint8_t)(c->node_id >> (24 - 8 * i));
    for (int i = 0; i < 4; i++) tid[12 + i] = (uint8_t)(c->instance_id >> (24 - 8 * i));
}

/* Body: value\0<n>\0pad\0xxx…\0, padded to exactly opt.payload bytes. */
static void send_one(struct sconn *c, struct slot *s)
{
    char digits[24];
    int d = snprintf(digits, sizeof digits, "%llu", (unsigned long long)next_value);
    uint32_t pad_len = (uint32_t)(opt.payload - 12 - d);
    s->value = next_value++;
    s->busy = 1;
    new_tid(c, s->tid);
    struct buf *b = &c->out;
    size_t f = frame_begin(b, F_SEND_ASYNC);
    put_raw(b, s->tid, TID_LEN);
    put_u32(b, 0);                            /* timeout: the broker's default */
    put_u8(b, 0); put_u8(b, 0);               /* priority, flags */
    put_str(b, opt.name, (uint16_t)strlen(opt.name));
    put_u32(b, 0);                            /* request_info: none */
    put_u32(b, (uint32_t)opt.payload);
    put_raw(b, "value", 6);
    put_raw(b, digits, (size_t)d + 1);
    put_raw(b, "pad", 4);
    put_raw(b, pad, pad_len);
    put_u8(b, 0);
    frame_end(b, f);
    s->start_ns = now_ns(CLOCK_MONOTONIC);
    c->inflight++;
}

static void on_response(struct sconn *c, const uint8_t *body, size_t len)
{
    struct rd r = { body, body + len, 0 };
    const uint8_t *tid = rd_take(&r, TID_LEN);
    uint16_t status = rd_u16(&r);
    uint32_t info_len, resp_len;
    rd_bytes(&r, &info_len);
    const uint8_t *resp = rd_bytes(&r, &resp_len);
    if (!rd_ok(&r)) die("%s", "malformed RESPONSE from the broker");
    struct slot *s = NULL;
    for (int i = 0; i < opt.inflight; i++)    /* D is small: a scan beats a hash */
        if (c->slots[i].busy && memcmp(c->slots[i].tid, tid, TID_LEN) == 0) { s = &c->slots[i]; break; }
    if (!s) die("%s", "RESPONSE for a trans_id not in flight");
    uint64_t done = now_ns(CLOCK_MONOTONIC);
    s->busy = 0;
    c->inflight--;
    if (status != S_OK) {
        if (errors++ == 0)
            fprintf(stderr, "sender: first error: status %u: %.*s\n", status, (int)(resp_len > 200 ? 200 : resp_len), resp);
    } else {
        char want[48];
        int n = snprintf(want, sizeof want, "<value>%llu</value>", (unsigned long long)s->value);
        if (!memmem(resp, resp_len, want, (size_t)n)) {
            if (bad_answers++ == 0)
                fprintf(stderr, "sender: first bad answer: %.*s\n", (int)(resp_len > 200 ? 200 : resp_len), resp);
        } else if (done >= warm_end_ns && done < end_ns) {
            if (lat_n == lat_cap) lat_us = xrealloc(lat_us, (lat_cap = lat_cap ? lat_cap * 2 : 65536) * sizeof *lat_us);
            uint64_t us = (done - s->start_ns + 500) / 1000;
            lat_us[lat_n++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
            ok_in_window++;
        }
    }
    if (!stopping) send_one(c, s);
}

/* Returns 0 when the connection ended (closed or ERROR). */
static int on_readable(struct sconn *c)
{
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    if (n <= 0) { fprintf(stderr, "sender: connection %d closed by the broker\n", c->idx); return 0; }
    c->in_len += (size_t)n;
    size_t off = 0;
    while (c->in_len - off >= 4) {
        uint32_t len = get_u32le(c->in + off);
        if (len == 0 || len > c->max_frame) die("%s", "bad frame length from the broker");
        if (c->in_len - off < 4 + (size_t)len) {
            if (4 + (size_t)len > c->in_cap) {
                memmove(c->in, c->in + off, c->in_len - off);
                c->in_len -= off; off = 0;
                c->in = xrealloc(c->in, c->in_cap = 4 + (size_t)len);
            }
            break;
        }
        const uint8_t *frame = c->in + off;
        uint8_t type = frame[4];
        if (type == F_RESPONSE) {
            on_response(c, frame + 5, len - 1);
        } else if (type == F_PING && len == 9) {
            size_t at = c->out.len;
            put_raw(&c->out, frame, 13);
            c->out.data[at + 4] = F_PONG;
        } else if (type == F_ERROR || type == F_TERMINATE) {
            fprintf(stderr, "sender: connection %d got %s\n", c->idx, type == F_ERROR ? "ERROR" : "TERMINATE");
            return 0;
        }                                     /* anything else is not for a pure client */
        off += 4 + (size_t)len;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return 1;
}

static int flush_conn(struct sconn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t n = write(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
        if (n > 0) { c->out_off += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        fprintf(stderr, "sender: connection %d: write failed\n", c->idx);
        return 0;
    }
    int left = c->out_off < c->out.len;
    if (!left) c->out_off = c->out.len = 0;
    if (left != c->want_out) {
        struct epoll_event ev = { .events = EPOLLIN | (left ? EPOLLOUT : 0), .data.ptr = c };
        epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = left;
    }
    return 1;
}

static void read_full(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, (uint8_t *)p + got, n - got);
        if (k <= 0) die("%s", "connection closed during the handshake");
        got += (size_t)k;
    }
}

/* Blocking HELLO/WELCOME: the handshake is not measured. */
static void handshake(struct sconn *c)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(opt.socket) >= sizeof addr.sun_path) die("socket path too long: %s", opt.socket);
    strcpy(addr.sun_path, opt.socket);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("cannot connect to %s", opt.socket);
    struct buf b = { 0 };
    size_t f = frame_begin(&b, F_HELLO);
    put_u16(&b, 1); put_u32(&b, 1); put_u32(&b, 0);     /* version, window, thread_index */
    put_str(&b, "", 0); put_str(&b, "/bench/", 7);      /* unmanaged: empty token, own prefix */
    frame_end(&b, f);
    if (write(c->fd, b.data, b.len) != (ssize_t)b.len) die("%s", "cannot send HELLO");
    free(b.data);
    uint8_t head[5];
    read_full(c->fd, head, 5);
    uint32_t len = get_u32le(head);
    if (len < 1 || len > 65536) die("%s", "bad frame length in the handshake");
    uint8_t *body = xrealloc(NULL, len);
    read_full(c->fd, body, len - 1);
    struct rd r = { body, body + len - 1, 0 };
    if (head[4] == F_ERROR) {
        uint16_t status = rd_u16(&r), n;
        const uint8_t *msg = rd_str(&r, &n);
        fprintf(stderr, "sender: HELLO refused, status %u: %.*s\n", status, msg ? (int)n : 0, msg ? (const char *)msg : "");
        exit(2);
    }
    if (head[4] != F_WELCOME) die("%s", "expected WELCOME");
    rd_u16(&r);
    c->node_id = rd_u32(&r);
    c->instance_id = rd_u32(&r);
    rd_take(&r, 16);                          /* process index/count, thread count, window */
    c->max_frame = rd_u32(&r);
    if (r.bad) die("%s", "short WELCOME");
    free(body);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    c->in = xrealloc(NULL, c->in_cap = READ_BUF);
    c->slots = calloc((size_t)opt.inflight, sizeof *c->slots);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t percentile(double p)     /* nearest rank over sorted lat_us */
{
    if (!lat_n) return 0;
    size_t rank = (size_t)(p * (double)lat_n + 0.999999);
    return lat_us[rank ? rank - 1 : 0];
}

static void usage(void)
{
    fprintf(stderr,
        "usage: sender --socket PATH --name NAME [--connections N (3)] [--inflight D (1)]\n"
        "              [--duration SECONDS (10)] [--warmup SECONDS (1)] [--payload BYTES (64)] [--json FILE]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        { "socket", 1, 0, 's' }, { "name", 1, 0, 'n' }, { "connections", 1, 0, 'c' },
        { "inflight", 1, 0, 'i' }, { "duration", 1, 0, 'd' }, { "warmup", 1, 0, 'w' },
        { "payload", 1, 0, 'p' }, { "json", 1, 0, 'j' }, { 0, 0, 0, 0 } };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (ch) {
        case 's': opt.socket = optarg; break;
        case 'n': opt.name = optarg; break;
        case 'c': opt.connections = atoi(optarg); break;
        case 'i': opt.inflight = atoi(optarg); break;
        case 'd': opt.duration = atof(optarg); break;
        case 'w': opt.warmup = atof(optarg); break;
        case 'p': opt.payload = atoi(optarg); break;
        case 'j': opt.json = optarg; break;
        default: usage();
        }
    }
    if (!opt.socket || !opt.name || optind != argc) usage();
    if (!*opt.name || strlen(opt.name) > UINT16_MAX) die("%s", "--name must be 1..65535 bytes");
    if (opt.connections < 1 || opt.connections > 10000) die("%s", "--connections must be 1..10000");
    if (opt.inflight < 1 || opt.inflight > 100000) die("%s", "--inflight must be 1..100000");
    if (!(opt.duration > 0) || opt.warmup < 0) die("%s", "--duration must be > 0 and --warmup >= 0");
    if (opt.payload < MIN_PAYLOAD || opt.payload > (1 << 22)) die("%s", "--payload must be 32..4194304 bytes");
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    pad = xrealloc(NULL, (size_t)opt.payload);
    memset(pad, 'x', (size_t)opt.payload);

    struct sconn *conns = calloc((size_t)opt.connections, sizeof *conns);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < opt.connections; i++) {
        conns[i].idx = i;
        handshake(&conns[i]);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &conns[i] };
        epoll_ctl(epfd, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }

    uint64_t start = now_ns(CLOCK_MONOTONIC);
    warm_end_ns = start + (uint64_t)(opt.warmup * 1e9);
    end_ns = warm_end_ns + (uint64_t)(opt.duration * 1e9);
    for (int i = 0; i < opt.connections; i++) {
        for (int k = 0; k < opt.inflight; k++) send_one(&conns[i], &conns[i].slots[k]);
        flush_conn(&conns[i]);
    }

    /* Run until the end, then stop sending and collect what is in flight. */
    int broken = 0;
    struct epoll_event evs[64];
    for (;;) {
        uint64_t now = now_ns(CLOCK_MONOTONIC);
        if (!stopping && now >= end_ns) stopping = 1;
        uint64_t outstanding = 0;
        for (int i = 0; i < opt.connections; i++) outstanding += conns[i].inflight;
        if (broken || (stopping && (outstanding == 0 || now >= end_ns + DRAIN_NS))) {
            unanswered = outstanding;
            break;
        }
        uint64_t deadline = stopping ? end_ns + DRAIN_NS : end_ns;
        uint64_t wait_ms = (deadline - now) / 1000000 + 1;
        int n = epoll_wait(epfd, evs, 64, wait_ms > 1000 ? 1000 : (int)wait_ms);
        for (int i = 0; i < n; i++) {
            struct sconn *c = evs[i].data.ptr;
            if ((evs[i].events & EPOLLOUT) && !flush_conn(c)) broken = 1;
            if ((evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !on_readable(c)) broken = 1;
        }
        for (int i = 0; i < opt.connections && !broken; i++)
            if (conns[i].out.len && !flush_conn(&conns[i])) broken = 1;
    }

    if (lat_n) qsort(lat_us, lat_n, sizeof *lat_us, cmp_u32);
    double rate = (double)ok_in_window / opt.duration;
    uint32_t p50 = percentile(0.50), p99 = percentile(0.99), max = lat_n ? lat_us[lat_n - 1] : 0;
    uint64_t all_errors = errors + bad_answers + unanswered;
    printf("sender: %d connections x %d in flight, %d-byte requests to %s, %.1f s after %.1f s warm-up\n",
           opt.connections, opt.inflight, opt.payload, opt.name, opt.duration, opt.warmup);
    printf("round trips: %llu = %.0f/s\n", (unsigned long long)ok_in_window, rate);
    printf("latency us: p50 %u  p99 %u  max %u\n", p50, p99, max);
    printf("errors: %llu status, %llu bad answers, %llu unanswered%s\n", (unsigned long long)errors,
           (unsigned long long)bad_answers, (unsigned long long)unanswered, broken ? " (connection lost)" : "");
    printf("rt_per_s=%.0f p50_us=%u p99_us=%u errors=%llu\n", rate, p50, p99, (unsigned long long)all_errors);
    if (opt.json) {
        FILE *f = fopen(opt.json, "w");
        if (!f) die("cannot write %s", opt.json);
        fprintf(f, "{\"rt_per_s\": %.0f, \"round_trips\": %llu, \"p50_us\": %u, \"p99_us\": %u, \"max_us\": %u, "
                   "\"errors\": %llu, \"status_errors\": %llu, \"bad_answers\": %llu, \"unanswered\": %llu, "
                   "\"connections\": %d, \"inflight\": %d, \"payload\": %d, \"duration_s\": %g, \"warmup_s\": %g}\n",
                rate, (unsigned long long)ok_in_window, p50, p99, max, (unsigned long long)all_errors,
                (unsigned long long)errors, (unsigned long long)bad_answers, (unsigned long long)unanswered,
                opt.connections, opt.inflight, opt.payload, opt.duration, opt.warmup);
        fclose(f);
    }
    return (all_errors || broken || !ok_in_window) ? 1 : 0;
}
