/* wire.h: the bits of cumulo protocol v1 (proto/PROTOCOL.md) shared by the
 * relay, the sender and the receiver. Header-only so each program stays one
 * compilation unit and the compiler can inline the hot encoders. */
#ifndef CUMULO_BENCH_WIRE_H
#define CUMULO_BENCH_WIRE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum frame_type {
    F_HELLO = 0x01, F_SUBSCRIBE = 0x02, F_UNSUBSCRIBE = 0x03, F_SUBSCRIBE_COUNT = 0x04,
    F_SEND_ASYNC = 0x10, F_SEND_SYNC = 0x11, F_MCAST_ASYNC = 0x12,
    F_RETURN = 0x20, F_FORWARD = 0x21,
    F_PING = 0x30, F_PONG = 0x31, F_GOODBYE = 0x32,
    F_WELCOME = 0x81, F_REQUEST = 0x82, F_RESPONSE = 0x83, F_REPLY = 0x84,
    F_MCAST_SENT = 0x85, F_TERMINATE = 0x86, F_ERROR = 0x87,
};

enum status {
    S_OK = 0, S_TIMEOUT = 1, S_NO_SERVICE = 2, S_QUEUE_FULL = 3, S_CRASHED = 4,
    S_MALFORMED = 5, S_SHUTTING_DOWN = 6, S_SERVICE_ERROR = 7, S_TOO_LARGE = 8,
    S_INVALID_ARGUMENT = 9, S_UNSUPPORTED_VERSION = 10, S_UNAUTHORIZED = 11,
    S_PROTOCOL = 12, S_UNAVAILABLE = 13,
};

#define TID_LEN 16
#define DEFAULT_MAX_FRAME (8u << 20)

static inline void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) { perror("realloc"); exit(70); }
    return q;
}

/* ---- encoding: a growable byte buffer ---------------------------------- */

struct buf { uint8_t *data; size_t len, cap; };

static inline uint8_t *buf_grow(struct buf *b, size_t extra)
{
    if (b->len + extra > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + extra) cap *= 2;
        b->data = xrealloc(b->data, cap);
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += extra;
    return p;
}

static inline void put_raw(struct buf *b, const void *p, size_t n) { if (n) memcpy(buf_grow(b, n), p, n); }
static inline void put_u8(struct buf *b, uint8_t v) { *buf_grow(b, 1) = v; }
static inline void put_u16(struct buf *b, uint16_t v)
{
    uint8_t *p = buf_grow(b, 2);
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
}
static inline void put_u32(struct buf *b, uint32_t v)
{
    uint8_t *p = buf_grow(b, 4);
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_u64(struct buf *b, uint64_t v)
{
    uint8_t *p = buf_grow(b, 8);
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_str(struct buf *b, const void *s, uint16_t n) { put_u16(b, n); put_raw(b, s, n); }
static inline void put_bytes(struct buf *b, const void *s, uint32_t n) { put_u32(b, n); put_raw(b, s, n); }

/* A frame is opened with its type and closed once the body is written, so the
 * length prefix never has to be computed by hand. */
static inline size_t frame_begin(struct buf *b, uint8_t type)
{
    size_t start = b->len;
    put_u32(b, 0);
    put_u8(b, type);
    return start;
}
static inline void frame_end(struct buf *b, size_t start)
{
    uint32_t len = (uint32_t)(b->len - start - 4);
    for (int i = 0; i < 4; i++) b->data[start + i] = (uint8_t)(len >> (8 * i));
}

/* ---- decoding: a bounds-checked cursor over a body parsed in place ----- */

struct rd { const uint8_t *p, *end; int bad; };

static inline const uint8_t *rd_take(struct rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) { r->bad = 1; return NULL; }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}
static inline uint8_t rd_u8(struct rd *r) { const uint8_t *p = rd_take(r, 1); return p ? p[0] : 0; }
static inline uint16_t rd_u16(struct rd *r)
{
    const uint8_t *p = rd_take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}
static inline uint32_t rd_u32(struct rd *r)
{
    const uint8_t *p = rd_take(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}
static inline uint64_t rd_u64(struct rd *r)
{
    uint64_t lo = rd_u32(r);
    return lo | (uint64_t)rd_u32(r) << 32;
}
/* str and bytes yield a pointer into the frame and their length. */
static inline const uint8_t *rd_str(struct rd *r, uint16_t *n) { *n = rd_u16(r); return rd_take(r, *n); }
static inline const uint8_t *rd_bytes(struct rd *r, uint32_t *n) { *n = rd_u32(r); return rd_take(r, *n); }
/* The body must be consumed exactly (PROTOCOL 2). */
static inline int rd_ok(const struct rd *r) { return !r->bad && r->p == r->end; }

static inline uint32_t get_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint32_t get_u32be(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Strict UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
static inline int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t more;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) { more = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { more = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { more = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i <= more) return 0;
        for (size_t k = 1; k <= more; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += more + 1;
    }
    return 1;
}

/* Key/value encoding (PROTOCOL 5): finds the first value of `key`.
 * Returns 1 and sets val and vlen when found, 0 when absent, -1 if malformed. */
static inline int kv_find(const uint8_t *kv, size_t n, const char *key,
                          const uint8_t **val, size_t *vlen)
{
    size_t klen = strlen(key), i = 0;
    int found = 0;
    if (n && kv[n - 1] != 0) return -1;
    while (i < n) {
        const uint8_t *k = kv + i, *kend = memchr(k, 0, n - i);
        if (!kend || kend + 1 >= kv + n) return -1;   /* a key without a value */
        const uint8_t *v = kend + 1, *vend = memchr(v, 0, (size_t)(kv + n - v));
        if (!vend) return -1;
        if (!found && (size_t)(kend - k) == klen && memcmp(k, key, klen) == 0) {
            *val = v; *vlen = (size_t)(vend - v); found = 1;
        }
        i = (size_t)(vend + 1 - kv);
    }
    return found;
}

static inline uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
