/* receiver: a minimal cumulo service instance for benchmarking a broker.
 *
 * One unmanaged connection, one subscription, blocking I/O. It answers each
 * REQUEST like the http_req example (SDK_GUIDE.md): the integer under `value`
 * comes back as <http_test><value>N</value></http_test>, with a content-type
 * in response_info. All RETURNs produced from one read go out in one write.
 * Prints "ready" on stdout once subscribed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "wire.h"

#define READ_BUF (256 * 1024)

static const char content_type[] = "content-type\0text/xml; charset=utf-8";  /* + implicit NUL */

static void die(const char *msg)
{
    fprintf(stderr, "receiver: %s\n", msg);
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: receiver --socket PATH --pattern PATTERN [--prefix /bench/] [--window W (1)]\n");
    exit(2);
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) die("write failed: the broker went away");
        p += k; n -= (size_t)k;
    }
}

/* Reads one whole frame into *in (grown as needed); returns its length field. */
static uint32_t read_frame(int fd, struct buf *in)
{
    in->len = 0;
    uint8_t *head = buf_grow(in, 4);
    for (size_t got = 0; got < 4;) {
        ssize_t k = read(fd, head + got, 4 - got);
        if (k <= 0) die("connection closed");
        got += (size_t)k;
    }
    uint32_t len = get_u32le(in->data);
    if (len == 0 || len > DEFAULT_MAX_FRAME) die("bad frame length");
    uint8_t *body = buf_grow(in, len);
    for (size_t got = 0; got < len;) {
        ssize_t k = read(fd, body + got, len - got);
        if (k <= 0) die("connection closed");
        got += (size_t)k;
    }
    return len;
}

/* Optional sign and decimal digits fitting in 64 bits, as http_req requires. */
static int parse_i64(const uint8_t *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i == n) return 0;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (limit - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static void answer(struct buf *out, const uint8_t *body, size_t len)
{
    struct rd r = { body, body + len, 0 };
    const uint8_t *tid = rd_take(&r, TID_LEN);
    rd_take(&r, 6 + 8);                       /* timeout, priority, flags, source */
    uint16_t n1, n2; uint32_t info_len, req_len;
    rd_str(&r, &n1); rd_str(&r, &n2);         /* name, pattern */
    rd_bytes(&r, &info_len);
    const uint8_t *req = rd_bytes(&r, &req_len);
    if (!rd_ok(&r)) die("malformed REQUEST");
    const uint8_t *val = NULL; size_t vlen = 0;
    int64_t v;
    char xml[96];
    int xml_len = kv_find(req, req_len, "value", &val, &vlen) == 1 && parse_i64(val, vlen, &v)
        ? snprintf(xml, sizeof xml, "<http_test><value>%" PRId64 "</value></http_test>", v)
        : snprintf(xml, sizeof xml, "<http_test><error>no value specified</error></http_test>");
    size_t f = frame_begin(out, F_RETURN);
    put_raw(out, tid, TID_LEN);
    put_u16(out, S_OK);
    put_bytes(out, content_type, sizeof content_type);
    put_bytes(out, xml, (uint32_t)xml_len);
    frame_end(out, f);
}

int main(int argc, char **argv)
{
    const char *socket_path = NULL, *prefix = "/bench/", *pattern = NULL;
    long window = 1;
    static const struct option longs[] = {
        { "socket", 1, 0, 's' }, { "prefix", 1, 0, 'x' }, { "pattern", 1, 0, 'p' },
        { "window", 1, 0, 'w' }, { 0, 0, 0, 0 } };
    int ch;
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (ch == 's') socket_path = optarg;
        else if (ch == 'x') prefix = optarg;
        else if (ch == 'p') pattern = optarg;
        else if (ch == 'w') window = atol(optarg);
        else usage();
    }
    if (!socket_path || !pattern || optind != argc || window < 1 || window > 1 << 20) usage();
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(socket_path) >= sizeof addr.sun_path) die("socket path too long");
    strcpy(addr.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("cannot connect");

    struct buf out = { 0 }, in = { 0 };
    size_t f = frame_begin(&out, F_HELLO);
    put_u16(&out, 1); put_u32(&out, (uint32_t)window); put_u32(&out, 0);
    put_str(&out, "", 0); put_str(&out, prefix, (uint16_t)strlen(prefix));
    frame_end(&out, f);
    f = frame_begin(&out, F_SUBSCRIBE);
    put_u32(&out, 1); put_str(&out, pattern, (uint16_t)strlen(pattern));
    frame_end(&out, f);
    write_all(fd, out.data, out.len);
    out.len = 0;
    read_frame(fd, &in);
    if (in.data[4] != F_WELCOME || in.len < 31) die("HELLO refused");
    uint32_t granted = get_u32le(in.data + 27);        /* WELCOME.window */
    read_frame(fd, &in);
    if (in.data[4] != F_REPLY || in.len < 11 || in.data[9] | in.data[10]) die("SUBSCRIBE refused");
    printf("ready\n");
    fflush(stdout);

    /* Serve: parse every complete frame of a read, answer them all at once. */
    /* Every request is answered before the next read, so the requests seen
     * between two writes can never outnumber the window: a cheap check that
     * the broker honours it. */
    in.len = 0;
    size_t start = 0;
    uint32_t since_write = 0;
    for (;;) {
        if (in.cap - in.len < READ_BUF / 2) buf_grow(&in, READ_BUF), in.len -= READ_BUF;
        ssize_t k = read(fd, in.data + in.len, in.cap - in.len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;                 /* the broker closed: done */
        in.len += (size_t)k;
        while (in.len - start >= 4) {
            uint32_t len = get_u32le(in.data + start);
            if (len == 0 || len > DEFAULT_MAX_FRAME) die("bad frame length");
            if (in.len - start < 4 + (size_t)len) {
                if (4 + (size_t)len > in.cap - start) buf_grow(&in, len), in.len -= len;
                break;
            }
            const uint8_t *frame = in.data + start;
            if (frame[4] == F_REQUEST) {
                if (++since_write > granted) die("the broker delivered more requests than the window");
                answer(&out, frame + 5, len - 1);
            } else if (frame[4] == F_PING && len == 9) {
                size_t at = out.len;
                put_raw(&out, frame, 13);
                out.data[at + 4] = F_PONG;
            } else if (frame[4] == F_TERMINATE) {
                write_all(fd, out.data, out.len);
                return 0;
            } else if (frame[4] == F_ERROR) {
                die("got ERROR from the broker");
            }
            start += 4 + (size_t)len;
        }
        memmove(in.data, in.data + start, in.len - start);
        in.len -= start;
        start = 0;
        if (out.len) { write_all(fd, out.data, out.len); out.len = 0; since_write = 0; }
    }
}
