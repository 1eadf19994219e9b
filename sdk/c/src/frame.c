/* Frame codec for the wire protocol v1 (PROTOCOL.md sections 2 and 4).
 * Decoding returns views into the input and never reads outside it. */
#include "cumulo.h"

#include <string.h>

/* ------------------------------------------------------------- decoding */

typedef struct reader {
    const uint8_t *p;
    size_t left;
    bool ok; /* false once any field did not fit or was invalid */
} reader;

static const uint8_t *take(reader *r, size_t n) {
    if (!r->ok || r->left < n) {
        r->ok = false;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    r->left -= n;
    return at;
}

static uint8_t get_u8(reader *r) {
    const uint8_t *b = take(r, 1);
    return b ? b[0] : 0;
}

static int8_t get_i8(reader *r) { return (int8_t)get_u8(r); }

static uint16_t get_u16(reader *r) {
    const uint8_t *b = take(r, 2);
    if (!b) return 0;
    return (uint16_t)(b[0] | (b[1] << 8));
}

static uint32_t load_u32(const uint8_t *b) {
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
           ((uint32_t)b[3] << 24);
}

static uint32_t get_u32(reader *r) {
    const uint8_t *b = take(r, 4);
    return b ? load_u32(b) : 0;
}

static uint64_t get_u64(reader *r) {
    const uint8_t *b = take(r, 8);
    if (!b) return 0;
    return (uint64_t)load_u32(b) | ((uint64_t)load_u32(b + 4) << 32);
}

static void get_tid(reader *r, cumulo_trans_id *out) {
    const uint8_t *b = take(r, 16);
    if (b) memcpy(out->bytes, b, 16);
    else memset(out->bytes, 0, 16);
}

static cumulo_str get_str(reader *r) {
    cumulo_str s = {"", 0};
    uint16_t n = get_u16(r);
    const uint8_t *b = take(r, n);
    if (!b) return s;
    if (!cumulo_utf8_valid(b, n)) {
        r->ok = false;
        return s;
    }
    s.data = (const char *)b;
    s.len = n;
    return s;
}

static cumulo_bytes get_bytes(reader *r) {
    static const uint8_t empty[1] = {0};
    cumulo_bytes v = {empty, 0};
    uint32_t n = get_u32(r);
    const uint8_t *b = take(r, n);
    if (!b) return v;
    v.data = b;
    v.len = n;
    return v;
}

bool cumulo_utf8_valid(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            need = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            need = 2, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            need = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (len - i - 1 < need) return false;
        for (size_t k = 1; k <= need; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += need + 1;
    }
    return true;
}

int cumulo_frame_header(const uint8_t *buf, size_t len, uint32_t max_frame, size_t *frame_len) {
    if (len < 4) return CUMULO_E_INCOMPLETE;
    uint32_t n = load_u32(buf);
    if (n == 0) return CUMULO_MALFORMED;
    if (n > max_frame) return CUMULO_TOO_LARGE;
    *frame_len = (size_t)n + 4;
    return CUMULO_OK;
}

static void decode_body(reader *r, cumulo_frame *f) {
    switch (f->type) {
    case CUMULO_FRAME_HELLO:
        f->u.hello.version = get_u16(r);
        f->u.hello.window = get_u32(r);
        f->u.hello.thread_index = get_u32(r);
        f->u.hello.token = get_str(r);
        f->u.hello.prefix = get_str(r);
        break;
    case CUMULO_FRAME_SUBSCRIBE:
    case CUMULO_FRAME_UNSUBSCRIBE:
    case CUMULO_FRAME_SUBSCRIBE_COUNT:
        f->u.control.req_id = get_u32(r);
        f->u.control.pattern = get_str(r);
        break;
    case CUMULO_FRAME_SEND_ASYNC:
    case CUMULO_FRAME_SEND_SYNC:
    case CUMULO_FRAME_MCAST_ASYNC:
    case CUMULO_FRAME_FORWARD:
        get_tid(r, &f->u.send.trans_id);
        f->u.send.timeout = get_u32(r);
        f->u.send.priority = get_i8(r);
        f->u.send.flags = get_u8(r);
        f->u.send.name = get_str(r);
        f->u.send.request_info = get_bytes(r);
        f->u.send.request = get_bytes(r);
        break;
    case CUMULO_FRAME_RETURN:
    case CUMULO_FRAME_RESPONSE:
        get_tid(r, &f->u.answer.trans_id);
        f->u.answer.status = get_u16(r);
        f->u.answer.response_info = get_bytes(r);
        f->u.answer.response = get_bytes(r);
        break;
    case CUMULO_FRAME_PING:
    case CUMULO_FRAME_PONG:
        f->u.ping.nonce = get_u64(r);
        break;
    case CUMULO_FRAME_GOODBYE:
        break;
    case CUMULO_FRAME_WELCOME:
        f->u.welcome.version = get_u16(r);
        f->u.welcome.node_id = get_u32(r);
        f->u.welcome.instance_id = get_u32(r);
        f->u.welcome.process_index = get_u32(r);
        f->u.welcome.process_count = get_u32(r);
        f->u.welcome.thread_count = get_u32(r);
        f->u.welcome.window = get_u32(r);
        f->u.welcome.max_frame = get_u32(r);
        f->u.welcome.timeout_async = get_u32(r);
        f->u.welcome.timeout_sync = get_u32(r);
        f->u.welcome.timeout_terminate = get_u32(r);
        f->u.welcome.priority_default = get_i8(r);
        f->u.welcome.keepalive = get_u32(r);
        f->u.welcome.prefix = get_str(r);
        break;
    case CUMULO_FRAME_REQUEST:
        get_tid(r, &f->u.request.trans_id);
        f->u.request.timeout = get_u32(r);
        f->u.request.priority = get_i8(r);
        f->u.request.flags = get_u8(r);
        f->u.request.source = get_u64(r);
        f->u.request.name = get_str(r);
        f->u.request.pattern = get_str(r);
        f->u.request.request_info = get_bytes(r);
        f->u.request.request = get_bytes(r);
        break;
    case CUMULO_FRAME_REPLY:
        f->u.reply.req_id = get_u32(r);
        f->u.reply.status = get_u16(r);
        f->u.reply.value = get_u32(r);
        f->u.reply.message = get_str(r);
        break;
    case CUMULO_FRAME_MCAST_SENT: {
        get_tid(r, &f->u.mcast_sent.trans_id);
        uint32_t count = get_u32(r);
        /* count * 16 cannot overflow size_t: count < 2^32 */
        const uint8_t *ids = take(r, (size_t)count * 16u);
        f->u.mcast_sent.count = ids ? count : 0;
        f->u.mcast_sent.trans_ids = ids;
        break;
    }
    case CUMULO_FRAME_TERMINATE:
        f->u.terminate.timeout = get_u32(r);
        break;
    case CUMULO_FRAME_ERROR:
        f->u.error.status = get_u16(r);
        f->u.error.message = get_str(r);
        break;
    default:
        r->ok = false; /* unknown type */
    }
}

int cumulo_frame_decode(const uint8_t *buf, size_t len, uint32_t max_frame, cumulo_frame *out) {
    size_t frame_len;
    memset(out, 0, sizeof *out);
    int rc = cumulo_frame_header(buf, len, max_frame, &frame_len);
    if (rc == CUMULO_E_INCOMPLETE) return CUMULO_MALFORMED;
    if (rc != CUMULO_OK) return rc;
    if (frame_len != len) return CUMULO_MALFORMED; /* truncated or trailing bytes */
    reader r = {buf + 5, len - 5, true};
    out->type = buf[4];
    decode_body(&r, out);
    if (!r.ok || r.left != 0) {
        uint8_t type = out->type;
        memset(out, 0, sizeof *out);
        out->type = type;
        return CUMULO_MALFORMED;
    }
    return CUMULO_OK;
}

/* ------------------------------------------------------------- encoding */

/* With out == NULL the writer only counts, so one walk serves size and encode. */
typedef struct writer {
    uint8_t *out;
    size_t cap;
    size_t len;
    bool bad; /* a field cannot be encoded */
} writer;

static void put(writer *w, const void *data, size_t n) {
    if (w->out && w->len + n <= w->cap && n) memcpy(w->out + w->len, data, n);
    w->len += n;
}

static void put_u8(writer *w, uint8_t v) { put(w, &v, 1); }

static void put_u16(writer *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_u32(writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(writer *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static void put_str(writer *w, cumulo_str s) {
    if (s.len > UINT16_MAX || (s.len && !s.data) ||
        !cumulo_utf8_valid((const uint8_t *)s.data, s.len)) {
        w->bad = true;
        return;
    }
    put_u16(w, (uint16_t)s.len);
    put(w, s.data, s.len);
}

static void put_bytes(writer *w, cumulo_bytes b) {
    if (b.len > UINT32_MAX || (b.len && !b.data)) {
        w->bad = true;
        return;
    }
    put_u32(w, (uint32_t)b.len);
    put(w, b.data, b.len);
}

static void encode_body(writer *w, const cumulo_frame *f) {
    put_u8(w, f->type);
    switch (f->type) {
    case CUMULO_FRAME_HELLO:
        put_u16(w, f->u.hello.version);
        put_u32(w, f->u.hello.window);
        put_u32(w, f->u.hello.thread_index);
        put_str(w, f->u.hello.token);
        put_str(w, f->u.hello.prefix);
        break;
    case CUMULO_FRAME_SUBSCRIBE:
    case CUMULO_FRAME_UNSUBSCRIBE:
    case CUMULO_FRAME_SUBSCRIBE_COUNT:
        put_u32(w, f->u.control.req_id);
        put_str(w, f->u.control.pattern);
        break;
    case CUMULO_FRAME_SEND_ASYNC:
    case CUMULO_FRAME_SEND_SYNC:
    case CUMULO_FRAME_MCAST_ASYNC:
    case CUMULO_FRAME_FORWARD:
        put(w, f->u.send.trans_id.bytes, 16);
        put_u32(w, f->u.send.timeout);
        put_u8(w, (uint8_t)f->u.send.priority);
        put_u8(w, f->u.send.flags);
        put_str(w, f->u.send.name);
        put_bytes(w, f->u.send.request_info);
        put_bytes(w, f->u.send.request);
        break;
    case CUMULO_FRAME_RETURN:
    case CUMULO_FRAME_RESPONSE:
        put(w, f->u.answer.trans_id.bytes, 16);
        put_u16(w, f->u.answer.status);
        put_bytes(w, f->u.answer.response_info);
        put_bytes(w, f->u.answer.response);
        break;
    case CUMULO_FRAME_PING:
    case CUMULO_FRAME_PONG:
        put_u64(w, f->u.ping.nonce);
        break;
    case CUMULO_FRAME_GOODBYE:
        break;
    case CUMULO_FRAME_WELCOME:
        put_u16(w, f->u.welcome.version);
        put_u32(w, f->u.welcome.node_id);
        put_u32(w, f->u.welcome.instance_id);
        put_u32(w, f->u.welcome.process_index);
        put_u32(w, f->u.welcome.process_count);
        put_u32(w, f->u.welcome.thread_count);
        put_u32(w, f->u.welcome.window);
        put_u32(w, f->u.welcome.max_frame);
        put_u32(w, f->u.welcome.timeout_async);
        put_u32(w, f->u.welcome.timeout_sync);
        put_u32(w, f->u.welcome.timeout_terminate);
        put_u8(w, (uint8_t)f->u.welcome.priority_default);
        put_u32(w, f->u.welcome.keepalive);
        put_str(w, f->u.welcome.prefix);
        break;
    case CUMULO_FRAME_REQUEST:
        put(w, f->u.request.trans_id.bytes, 16);
        put_u32(w, f->u.request.timeout);
        put_u8(w, (uint8_t)f->u.request.priority);
        put_u8(w, f->u.request.flags);
        put_u64(w, f->u.request.source);
        put_str(w, f->u.request.name);
        put_str(w, f->u.request.pattern);
        put_bytes(w, f->u.request.request_info);
        put_bytes(w, f->u.request.request);
        break;
    case CUMULO_FRAME_REPLY:
        put_u32(w, f->u.reply.req_id);
        put_u16(w, f->u.reply.status);
        put_u32(w, f->u.reply.value);
        put_str(w, f->u.reply.message);
        break;
    case CUMULO_FRAME_MCAST_SENT:
        if (f->u.mcast_sent.count && !f->u.mcast_sent.trans_ids) {
            w->bad = true;
            break;
        }
        put(w, f->u.mcast_sent.trans_id.bytes, 16);
        put_u32(w, f->u.mcast_sent.count);
        put(w, f->u.mcast_sent.trans_ids, (size_t)f->u.mcast_sent.count * 16u);
        break;
    case CUMULO_FRAME_TERMINATE:
        put_u32(w, f->u.terminate.timeout);
        break;
    case CUMULO_FRAME_ERROR:
        put_u16(w, f->u.error.status);
        put_str(w, f->u.error.message);
        break;
    default:
        w->bad = true;
    }
}

size_t cumulo_frame_size(const cumulo_frame *frame) {
    writer w = {NULL, 0, 0, false};
    encode_body(&w, frame);
    if (w.bad || w.len > UINT32_MAX) return 0;
    return w.len + 4;
}

int cumulo_frame_encode(const cumulo_frame *frame, uint8_t *out, size_t cap, size_t *written) {
    size_t size = cumulo_frame_size(frame);
    *written = 0;
    if (size == 0) return CUMULO_INVALID_ARGUMENT;
    if (size > cap) return CUMULO_TOO_LARGE;
    writer w = {out, cap, 0, false};
    put_u32(&w, (uint32_t)(size - 4));
    encode_body(&w, frame);
    *written = w.len;
    return CUMULO_OK;
}

/* ------------------------------------------------------------ trans_ids */

void cumulo_trans_id_hex(const cumulo_trans_id *id, char out[33]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[id->bytes[i] >> 4];
        out[2 * i + 1] = digits[id->bytes[i] & 15];
    }
    out[32] = '\0';
}

bool cumulo_trans_id_equal(const cumulo_trans_id *a, const cumulo_trans_id *b) {
    return memcmp(a->bytes, b->bytes, 16) == 0;
}
