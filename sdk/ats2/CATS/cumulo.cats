/* C side of the ATS2 bindings (SATS/cumulo.sats) over the cumulo C SDK:
 * small adapters where a C call's shape does not map straight onto an ATS
 * function (out-parameters, optional pointers, views of not NUL-terminated
 * text). Included into the C that patsopt generates. */
#ifndef CUMULO_ATS_CATS
#define CUMULO_ATS_CATS

#include "cumulo.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cumulo_api *atscumulo_api;
typedef const cumulo_request *atscumulo_request;

/* The last connect error of this thread (connect has no instance to keep it in). */
static _Thread_local char atscumulo_connect_error_text[256];

static inline atscumulo_api atscumulo_connect(unsigned thread_index, unsigned window) {
    cumulo_config config = {0};
    config.thread_index = thread_index;
    config.window = window;
    cumulo_api *api = NULL;
    atscumulo_connect_error_text[0] = 0;
    cumulo_connect(&api, &config, atscumulo_connect_error_text, sizeof atscumulo_connect_error_text);
    return api;
}

static inline atscumulo_api atscumulo_connect_unmanaged(const char *socket, const char *prefix) {
    cumulo_api *api = NULL;
    atscumulo_connect_error_text[0] = 0;
    cumulo_connect_unmanaged(&api, socket, prefix, atscumulo_connect_error_text,
                             sizeof atscumulo_connect_error_text);
    return api;
}

static inline atscumulo_api atscumulo_connect_fd(int fd, const char *prefix) {
    cumulo_config config = {0};
    config.token = "";
    config.prefix = prefix;
    cumulo_api *api = NULL;
    atscumulo_connect_error_text[0] = 0;
    cumulo_connect_fd(&api, fd, &config, atscumulo_connect_error_text, sizeof atscumulo_connect_error_text);
    return api;
}

static inline char *atscumulo_connect_error(void) { return atscumulo_connect_error_text; }

static inline int atscumulo_subscribe_count(cumulo_api *api, const char *pattern, unsigned *count) {
    uint32_t n = 0;
    int rc = cumulo_subscribe_count(api, pattern, &n);
    *count = n;
    return rc;
}

/* Send options from plain values: timeout 0 = the default, priority outside
 * -128..127 = priority_default. */
static inline cumulo_send_options atscumulo_options(cumulo_bytes info, unsigned timeout, int priority) {
    cumulo_send_options o;
    memset(&o, 0, sizeof o);
    o.request_info = info;
    o.timeout = timeout;
    o.has_priority = priority >= -128 && priority <= 127;
    o.priority = (int8_t)(o.has_priority ? priority : 0);
    return o;
}

static inline int atscumulo_send_async(cumulo_api *api, const char *name, cumulo_bytes request,
                                       cumulo_bytes info, unsigned timeout, int priority,
                                       cumulo_trans_id *trans_id) {
    cumulo_send_options o = atscumulo_options(info, timeout, priority);
    return cumulo_send_async(api, name, request.data, request.len, &o, trans_id);
}

static inline int atscumulo_send_sync(cumulo_api *api, const char *name, cumulo_bytes request,
                                      cumulo_bytes info, unsigned timeout, int priority,
                                      cumulo_response *response) {
    cumulo_send_options o = atscumulo_options(info, timeout, priority);
    memset(response, 0, sizeof *response);
    return cumulo_send_sync(api, name, request.data, request.len, &o, response);
}

static inline int atscumulo_mcast_async(cumulo_api *api, const char *name, cumulo_bytes request,
                                        cumulo_bytes info, unsigned timeout, int priority,
                                        const cumulo_trans_id **ids, size_t *count) {
    cumulo_send_options o = atscumulo_options(info, timeout, priority);
    *ids = NULL;
    *count = 0;
    return cumulo_mcast_async(api, name, request.data, request.len, &o, ids, count);
}

static inline int atscumulo_recv_async(cumulo_api *api, const cumulo_trans_id *trans_id, int timeout_ms,
                                       cumulo_response *response) {
    memset(response, 0, sizeof *response);
    return cumulo_recv_async(api, trans_id, timeout_ms, response);
}

static inline int atscumulo_forward(cumulo_api *api, const cumulo_request *request, const char *name,
                                    cumulo_bytes info, cumulo_bytes body, unsigned timeout, int priority) {
    /* the request's own priority unless another is given */
    cumulo_send_options o = atscumulo_options(info, timeout, priority);
    if (!o.has_priority) {
        o.has_priority = true;
        o.priority = request->priority;
    }
    return cumulo_forward(api, request, name, body.data, body.len, &o);
}

static inline int atscumulo_return(cumulo_api *api, const cumulo_request *request, cumulo_bytes info,
                                   cumulo_bytes body) {
    return cumulo_return(api, request, info.data, info.len, body.data, body.len);
}

static inline int atscumulo_run(unsigned window, cumulo_setup setup, void *user_data) {
    cumulo_config config = {0};
    config.window = window;
    return cumulo_run(&config, 0, setup, user_data);
}

/* ---- bytes: views (data, len) over memory the caller keeps alive */

static inline cumulo_bytes atscumulo_bytes_of_string(const char *s) {
    cumulo_bytes b = {(const uint8_t *)s, strlen(s)};
    return b;
}
static inline cumulo_bytes atscumulo_bytes_empty(void) {
    cumulo_bytes b = {NULL, 0};
    return b;
}
static inline cumulo_bytes atscumulo_bytes_of_str(cumulo_str s) {
    cumulo_bytes b = {(const uint8_t *)s.data, s.len};
    return b;
}
static inline int atscumulo_bytes_get(cumulo_bytes b, size_t i) { return i < b.len ? b.data[i] : -1; }
static inline bool atscumulo_bytes_equal(cumulo_bytes a, cumulo_bytes b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}
/* A copy as a NUL-terminated string (malloc'd; NUL bytes inside end it early). */
static inline char *atscumulo_bytes_to_string(cumulo_bytes b) {
    char *s = malloc(b.len + 1);
    if (!s) abort();
    if (b.len) memcpy(s, b.data, b.len);
    s[b.len] = 0;
    return s;
}
static inline void atscumulo_bytes_print(cumulo_bytes b) {
    if (b.len) fwrite(b.data, 1, b.len, stdout);
}
static inline void atscumulo_bytes_print_hex(cumulo_bytes b) {
    for (size_t i = 0; i < b.len; i++) printf("%02x", b.data[i]);
}
/* Lower-case hex of the bytes (malloc'd). */
static inline char *atscumulo_bytes_hex(cumulo_bytes b) {
    char *s = malloc(2 * b.len + 1);
    if (!s) abort();
    for (size_t i = 0; i < b.len; i++) snprintf(s + 2 * i, 3, "%02x", b.data[i]);
    s[2 * b.len] = 0;
    return s;
}
/* Bytes from hex digits (malloc'd: give them back with bytes_free). An odd
 * length or a non-hex digit gives len (size_t)-1 and no data. */
static inline cumulo_bytes atscumulo_bytes_of_hex(const char *hex) {
    size_t n = strlen(hex);
    cumulo_bytes b = {NULL, (size_t)-1};
    if (n % 2) return b;
    uint8_t *out = malloc(n / 2 + 1);
    if (!out) abort();
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        /* sscanf alone takes "0g" as 0: both digits must be hex. */
        if (!isxdigit((unsigned char)hex[2 * i]) || !isxdigit((unsigned char)hex[2 * i + 1]) ||
            sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(out);
            return b;
        }
        out[i] = (uint8_t)v;
    }
    b.data = out;
    b.len = n / 2;
    return b;
}

/* Frees bytes the SDK allocated (info_encode, bytes_of_hex); bad hex (no
 * data) is fine. Never a view of a string or of a request. */
static inline void atscumulo_bytes_free(cumulo_bytes b) {
    free((void *)b.data);
}

/* ---- key/value */

static inline int atscumulo_info_count(cumulo_bytes info, size_t *count) {
    *count = 0;
    return cumulo_kv_validate(info.data, info.len, count);
}

/* The pair at index i (0-based) of a valid buffer. */
static inline void atscumulo_info_pair(cumulo_bytes info, size_t i, cumulo_bytes *key, cumulo_bytes *value) {
    size_t offset = 0;
    cumulo_kv pair;
    memset(&pair, 0, sizeof pair);
    for (size_t k = 0; k <= i && cumulo_kv_next(info.data, info.len, &offset, &pair); k++) {}
    *key = pair.key;
    *value = pair.value;
}

/* found is an ATS bool (an int). */
static inline int atscumulo_info_find(cumulo_bytes info, const char *key, cumulo_bytes *value, int *found) {
    bool got = false;
    value->data = NULL;
    value->len = 0;
    int rc = cumulo_kv_find(info.data, info.len, key, strlen(key), value, &got);
    *found = got;
    return rc;
}

/* ---- requests */

static inline cumulo_bytes atscumulo_request_name(const cumulo_request *r) { return atscumulo_bytes_of_str(r->name); }
static inline cumulo_bytes atscumulo_request_pattern(const cumulo_request *r) { return atscumulo_bytes_of_str(r->pattern); }
static inline cumulo_bytes atscumulo_request_info(const cumulo_request *r) { return r->request_info; }
static inline cumulo_bytes atscumulo_request_body(const cumulo_request *r) { return r->request; }
static inline unsigned atscumulo_request_timeout(const cumulo_request *r) { return r->timeout; }
static inline int atscumulo_request_priority(const cumulo_request *r) { return r->priority; }
static inline unsigned long long atscumulo_request_source(const cumulo_request *r) { return r->source; }
static inline bool atscumulo_request_sync(const cumulo_request *r) { return (r->flags & CUMULO_REQUEST_SYNC) != 0; }
static inline cumulo_trans_id atscumulo_request_trans_id(const cumulo_request *r) { return r->trans_id; }

static inline char *atscumulo_prefix(const cumulo_api *api) { return (char *)cumulo_prefix(api).data; }
static inline char *atscumulo_trans_id_hex(cumulo_trans_id id) {
    char *s = malloc(33);
    if (!s) abort();
    cumulo_trans_id_hex(&id, s);
    return s;
}
static inline cumulo_trans_id atscumulo_trans_id_at(const cumulo_trans_id *ids, size_t i) { return ids[i]; }
static inline bool atscumulo_trans_id_equal(cumulo_trans_id a, cumulo_trans_id b) { return cumulo_trans_id_equal(&a, &b); }


/* ---- handlers, setup and responses (ATS function pointers arrive as void *) */

static inline int atscumulo_subscribe(cumulo_api *api, const char *pattern, void *handler, void *user_data) {
    return cumulo_subscribe(api, pattern, (cumulo_handler)handler, user_data);
}
static inline int atscumulo_run_setup(unsigned window, void *setup, void *user_data) {
    return atscumulo_run(window, (cumulo_setup)setup, user_data);
}
static inline int atscumulo_response_status(const cumulo_response *r) { return r->status; }
static inline cumulo_bytes atscumulo_response_info(const cumulo_response *r) { return r->response_info; }
static inline cumulo_bytes atscumulo_response_body(const cumulo_response *r) { return r->response; }
static inline cumulo_trans_id atscumulo_response_trans_id(const cumulo_response *r) { return r->trans_id; }

/* ---- a growing key/value buffer, for info_encode over an ATS list */

typedef struct atscumulo_kvbuf {
    uint8_t *data;
    size_t len, cap;
    bool bad;
} atscumulo_kvbuf;

static inline atscumulo_kvbuf *atscumulo_kvbuf_new(void) {
    atscumulo_kvbuf *b = calloc(1, sizeof *b);
    if (!b) abort();
    return b;
}
static inline void atscumulo_kvbuf_add(atscumulo_kvbuf *b, const char *key, const char *value) {
    size_t kl = strlen(key), vl = strlen(value);
    if (b->len + kl + vl + 2 > b->cap) {
        size_t cap = 2 * (b->len + kl + vl + 2);
        uint8_t *data = realloc(b->data, cap);
        if (!data) abort();
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, key, kl + 1);
    memcpy(b->data + b->len + kl + 1, value, vl + 1);
    b->len += kl + vl + 2;
}
/* The encoded bytes (the buffer's memory now belongs to them). */
static inline cumulo_bytes atscumulo_kvbuf_finish(atscumulo_kvbuf *b) {
    cumulo_bytes out = {b->data, b->len};
    free(b);
    return out;
}

static inline char *atscumulo_status_name(int status) { return (char *)cumulo_status_name(status); }
static inline char *atscumulo_error_message(const cumulo_api *api) { return (char *)cumulo_error_message(api); }

#endif /* CUMULO_ATS_CATS */
