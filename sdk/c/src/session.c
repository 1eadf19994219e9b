/* Session logic after WELCOME: control requests, sends, collecting responses,
 * the poll loop and handler dispatch (PROTOCOL.md section 3). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------- stored frames */

static int store(cumulo_api *api, frame_queue *q, const cumulo_frame *f) {
    /* Re-encoding gives back the exact bytes received (the codec round-trips). */
    size_t size = cumulo_frame_size(f);
    stored_frame *s = malloc(sizeof *s + size);
    if (!s) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
    size_t written;
    cumulo_frame_encode(f, s->data, size, &written);
    s->len = written;
    s->next = NULL;
    if (q->tail) q->tail->next = s;
    else q->head = s;
    q->tail = s;
    return CUMULO_OK;
}

static stored_frame *unlink_after(frame_queue *q, stored_frame *prev) {
    stored_frame *s = prev ? prev->next : q->head;
    if (prev) prev->next = s->next;
    else q->head = s->next;
    if (q->tail == s) q->tail = prev;
    s->next = NULL;
    return s;
}

static void decode_stored(const stored_frame *s, cumulo_frame *f) {
    /* Stored frames were encoded by us from a valid frame: decoding cannot fail. */
    cumulo_frame_decode(s->data, s->len, UINT32_MAX, f);
}

/* ------------------------------------------------------ frame handling */

/* Reads the next frame, answering PING and noting TERMINATE on the way.
 * ERROR from the core ends the connection and returns its status. */
static int next_frame(cumulo_api *api, int64_t deadline, cumulo_frame *f) {
    for (;;) {
        int rc = cumulo__read_frame(api, deadline, f);
        if (rc != CUMULO_OK) return rc;
        switch (f->type) {
        case CUMULO_FRAME_PING: {
            cumulo_frame pong = {.type = CUMULO_FRAME_PONG};
            pong.u.ping.nonce = f->u.ping.nonce;
            rc = cumulo__send_frame(api, &pong);
            if (rc != CUMULO_OK) return rc;
            continue;
        }
        case CUMULO_FRAME_PONG:
            continue;
        case CUMULO_FRAME_TERMINATE:
            api->terminated = true;
            return CUMULO_OK;
        case CUMULO_FRAME_ERROR: {
            int status = f->u.error.status ? f->u.error.status : CUMULO_PROTOCOL;
            cumulo__fail(api, status, "core closed the connection: %s: %.*s",
                         cumulo_status_name(f->u.error.status), (int)f->u.error.message.len,
                         f->u.error.message.data);
            return cumulo__close(api, status);
        }
        case CUMULO_FRAME_REQUEST:
        case CUMULO_FRAME_RESPONSE:
        case CUMULO_FRAME_REPLY:
        case CUMULO_FRAME_MCAST_SENT:
            return CUMULO_OK;
        default:
            return cumulo__close(api, cumulo__fail(api, CUMULO_PROTOCOL,
                                                   "unexpected frame type 0x%02x from the core",
                                                   f->type));
        }
    }
}

/* Keeps a frame nobody waits for right now: REQUESTs for the next poll,
 * RESPONSEs for recv_async. Stray REPLY/MCAST_SENT frames cannot be claimed
 * by anyone and are dropped. */
static int set_aside(cumulo_api *api, const cumulo_frame *f) {
    if (f->type == CUMULO_FRAME_REQUEST) return store(api, &api->requests, f);
    if (f->type == CUMULO_FRAME_RESPONSE) return store(api, &api->responses, f);
    return CUMULO_OK;
}

typedef struct wanted {
    uint8_t type;
    uint32_t req_id;              /* REPLY */
    const cumulo_trans_id *tid;   /* RESPONSE, MCAST_SENT; NULL = any RESPONSE */
} wanted;

static bool matches(const wanted *w, const cumulo_frame *f) {
    if (f->type != w->type) return false;
    switch (f->type) {
    case CUMULO_FRAME_REPLY:
        return f->u.reply.req_id == w->req_id;
    case CUMULO_FRAME_RESPONSE:
        return !w->tid || cumulo_trans_id_equal(&f->u.answer.trans_id, w->tid);
    case CUMULO_FRAME_MCAST_SENT:
        return cumulo_trans_id_equal(&f->u.mcast_sent.trans_id, w->tid);
    default:
        return false;
    }
}

/* Reads until the wanted frame arrives, setting everything else aside. */
static int wait_for(cumulo_api *api, const wanted *w, int64_t deadline, cumulo_frame *f) {
    for (;;) {
        int rc = next_frame(api, deadline, f);
        if (rc != CUMULO_OK) return rc;
        if (matches(w, f)) return CUMULO_OK;
        rc = set_aside(api, f);
        if (rc != CUMULO_OK) return rc;
    }
}

/* ------------------------------------------------------ control requests */

static cumulo_str full_pattern(cumulo_api *api, const char *pattern, int *rc) {
    size_t len = strlen(pattern);
    cumulo_str s = {NULL, 0};
    if (!cumulo__grow(&api->scratch, api->prefix_len + len + 1)) {
        *rc = cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
        return s;
    }
    memcpy(api->scratch.data, api->prefix, api->prefix_len);
    memcpy(api->scratch.data + api->prefix_len, pattern, len + 1);
    s.data = (const char *)api->scratch.data;
    s.len = api->prefix_len + len;
    *rc = CUMULO_OK;
    return s;
}

static int control(cumulo_api *api, uint8_t type, const char *pattern, uint32_t *value) {
    if (!pattern) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "pattern is NULL");
    cumulo_frame req = {.type = type};
    req.u.control.req_id = ++api->next_req_id;
    req.u.control.pattern = (cumulo_str){pattern, strlen(pattern)};
    int rc = cumulo__send_frame(api, &req);
    if (rc != CUMULO_OK) return rc;
    wanted w = {.type = CUMULO_FRAME_REPLY, .req_id = req.u.control.req_id};
    cumulo_frame reply;
    rc = wait_for(api, &w, -1, &reply);
    if (rc != CUMULO_OK) return rc;
    if (value) *value = reply.u.reply.value;
    if (reply.u.reply.status != CUMULO_OK)
        return cumulo__fail(api, reply.u.reply.status, "%s: %.*s",
                            cumulo_status_name(reply.u.reply.status),
                            (int)reply.u.reply.message.len, reply.u.reply.message.data);
    return CUMULO_OK;
}

static subscription *find_subscription(cumulo_api *api, const char *pattern, size_t len) {
    for (size_t i = 0; i < api->subs_len; i++)
        if (api->subs[i].pattern_len == len && memcmp(api->subs[i].pattern, pattern, len) == 0)
            return &api->subs[i];
    return NULL;
}

int cumulo_subscribe(cumulo_api *api, const char *pattern, cumulo_handler handler, void *user_data) {
    if (!handler) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "handler is NULL");
    /* Make room first so a failed allocation cannot leave an unhandled subscription. */
    if (api->subs_len == api->subs_cap) {
        size_t cap = api->subs_cap ? api->subs_cap * 2 : 4;
        subscription *subs = realloc(api->subs, cap * sizeof *subs);
        if (!subs) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
        api->subs = subs;
        api->subs_cap = cap;
    }
    int rc = control(api, CUMULO_FRAME_SUBSCRIBE, pattern, NULL);
    if (rc != CUMULO_OK) return rc;
    cumulo_str full = full_pattern(api, pattern, &rc);
    if (rc != CUMULO_OK) return rc;
    subscription *sub = find_subscription(api, full.data, full.len);
    if (!sub) {
        char *copy = malloc(full.len + 1);
        if (!copy) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
        memcpy(copy, full.data, full.len + 1);
        sub = &api->subs[api->subs_len++];
        *sub = (subscription){copy, full.len, 0, handler, user_data};
    }
    sub->count++;
    sub->handler = handler; /* the latest handler wins for a pattern */
    sub->user_data = user_data;
    return CUMULO_OK;
}

int cumulo_unsubscribe(cumulo_api *api, const char *pattern) {
    int rc = control(api, CUMULO_FRAME_UNSUBSCRIBE, pattern, NULL);
    if (rc != CUMULO_OK) return rc;
    cumulo_str full = full_pattern(api, pattern, &rc);
    if (rc != CUMULO_OK) return rc;
    subscription *sub = find_subscription(api, full.data, full.len);
    if (sub && --sub->count == 0) {
        free(sub->pattern);
        *sub = api->subs[--api->subs_len];
    }
    return CUMULO_OK;
}

int cumulo_subscribe_count(cumulo_api *api, const char *pattern, uint32_t *count) {
    uint32_t value = 0;
    int rc = control(api, CUMULO_FRAME_SUBSCRIBE_COUNT, pattern, &value);
    if (count) *count = rc == CUMULO_OK ? value : 0;
    return rc;
}

/* ----------------------------------------------------------------- sends */

/* PROTOCOL 2.2: time-ordered, strictly increasing per instance. */
static void new_trans_id(cumulo_api *api, cumulo_trans_id *id) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (ns <= api->last_trans_ns) ns = api->last_trans_ns + 1;
    api->last_trans_ns = ns;
    for (int i = 0; i < 8; i++) id->bytes[i] = (uint8_t)(ns >> (56 - 8 * i));
    for (int i = 0; i < 4; i++) {
        id->bytes[8 + i] = (uint8_t)(api->node_id >> (24 - 8 * i));
        id->bytes[12 + i] = (uint8_t)(api->instance_id >> (24 - 8 * i));
    }
}

/* PROTOCOL.md 5.1: while a handler runs, an outgoing request_info without a
 * traceparent key gets the handled request's traceparent (and tracestate)
 * pairs appended; one with its own traceparent, or one that is not in the
 * key/value encoding (request_info need not be), is sent as it is. */
static int with_trace(cumulo_api *api, cumulo_bytes *info) {
    if (api->trace_count == 0) return CUMULO_OK;
    cumulo_bytes value = {NULL, 0};
    bool found = false;
    if (cumulo_kv_find(info->data, info->len, "traceparent", 11, &value, &found) != CUMULO_OK ||
        found)
        return CUMULO_OK;
    size_t extra = 0;
    cumulo_kv_encode(api->trace, api->trace_count, NULL, 0, &extra); /* measures */
    if (!cumulo__grow(&api->trace_info, info->len + extra))
        return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
    if (info->len) memcpy(api->trace_info.data, info->data, info->len);
    cumulo_kv_encode(api->trace, api->trace_count, api->trace_info.data + info->len, extra, &extra);
    *info = (cumulo_bytes){api->trace_info.data, info->len + extra};
    return CUMULO_OK;
}

static int send_request(cumulo_api *api, uint8_t type, const char *name, const void *request,
                        size_t request_len, const cumulo_send_options *options,
                        uint32_t default_timeout, cumulo_trans_id *tid) {
    static const cumulo_send_options no_options;
    if (!options) options = &no_options;
    if (!name || !*name) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "name is empty");
    if (request_len && !request) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "request is NULL");
    cumulo_frame f = {.type = type};
    new_trans_id(api, &f.u.send.trans_id);
    f.u.send.timeout = options->timeout ? options->timeout : default_timeout;
    f.u.send.priority = options->has_priority ? options->priority : api->priority_default;
    f.u.send.flags = options->flags;
    f.u.send.name = (cumulo_str){name, strlen(name)};
    f.u.send.request_info = options->request_info;
    f.u.send.request = (cumulo_bytes){request, request_len};
    int rc = with_trace(api, &f.u.send.request_info);
    if (rc == CUMULO_OK) rc = cumulo__send_frame(api, &f);
    if (rc == CUMULO_OK && tid) *tid = f.u.send.trans_id;
    return rc;
}

static void fill_response(const cumulo_frame *f, cumulo_response *out) {
    if (!out) return;
    out->trans_id = f->u.answer.trans_id;
    out->status = f->u.answer.status;
    out->response_info = f->u.answer.response_info;
    out->response = f->u.answer.response;
}

static int response_status(cumulo_api *api, const cumulo_frame *f) {
    uint16_t status = f->u.answer.status;
    if (status == CUMULO_OK) return CUMULO_OK;
    return cumulo__fail(api, status, "%s: %.*s", cumulo_status_name(status),
                        (int)(f->u.answer.response.len > 400 ? 400 : f->u.answer.response.len),
                        (const char *)f->u.answer.response.data);
}

int cumulo_send_async(cumulo_api *api, const char *name, const void *request, size_t request_len,
                      const cumulo_send_options *options, cumulo_trans_id *trans_id) {
    return send_request(api, CUMULO_FRAME_SEND_ASYNC, name, request, request_len, options,
                        api->timeout_async, trans_id);
}

int cumulo_send_sync(cumulo_api *api, const char *name, const void *request, size_t request_len,
                     const cumulo_send_options *options, cumulo_response *response) {
    cumulo_trans_id tid;
    int rc = send_request(api, CUMULO_FRAME_SEND_SYNC, name, request, request_len, options,
                          api->timeout_sync, &tid);
    if (rc != CUMULO_OK) return rc;
    wanted w = {.type = CUMULO_FRAME_RESPONSE, .tid = &tid};
    cumulo_frame f;
    rc = wait_for(api, &w, -1, &f);
    if (rc != CUMULO_OK) return rc;
    fill_response(&f, response);
    return response_status(api, &f);
}

int cumulo_mcast_async(cumulo_api *api, const char *name, const void *request, size_t request_len,
                       const cumulo_send_options *options, const cumulo_trans_id **trans_ids,
                       size_t *count) {
    cumulo_trans_id tid;
    *trans_ids = NULL;
    *count = 0;
    int rc = send_request(api, CUMULO_FRAME_MCAST_ASYNC, name, request, request_len, options,
                          api->timeout_async, &tid);
    if (rc != CUMULO_OK) return rc;
    wanted w = {.type = CUMULO_FRAME_MCAST_SENT, .tid = &tid};
    cumulo_frame f;
    rc = wait_for(api, &w, -1, &f);
    if (rc != CUMULO_OK) return rc;
    size_t n = f.u.mcast_sent.count;
    if (n > api->mcast_cap) {
        cumulo_trans_id *ids = realloc(api->mcast_ids, n * sizeof *ids);
        if (!ids) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
        api->mcast_ids = ids;
        api->mcast_cap = n;
    }
    for (size_t i = 0; i < n; i++) memcpy(api->mcast_ids[i].bytes, f.u.mcast_sent.trans_ids + 16 * i, 16);
    *trans_ids = api->mcast_ids;
    *count = n;
    return CUMULO_OK;
}

int cumulo_recv_async(cumulo_api *api, const cumulo_trans_id *trans_id, int timeout_ms,
                      cumulo_response *response) {
    free(api->collected);
    api->collected = NULL;
    cumulo_frame f;
    stored_frame *prev = NULL;
    for (stored_frame *s = api->responses.head; s; prev = s, s = s->next) {
        decode_stored(s, &f);
        if (!trans_id || cumulo_trans_id_equal(&f.u.answer.trans_id, trans_id)) {
            api->collected = unlink_after(&api->responses, prev);
            fill_response(&f, response);
            return CUMULO_OK;
        }
    }
    wanted w = {.type = CUMULO_FRAME_RESPONSE, .tid = trans_id};
    int rc = wait_for(api, &w, cumulo__deadline(timeout_ms), &f);
    if (rc == CUMULO_TIMEOUT)
        return cumulo__fail(api, rc, "no response arrived within %d ms", timeout_ms);
    if (rc != CUMULO_OK) return rc;
    fill_response(&f, response);
    return CUMULO_OK;
}

/* ------------------------------------------------------------- answering */

/* Notes that the request whose handler runs got its answer; a second answer
 * to it is refused. */
static int claim_answer(cumulo_api *api, const cumulo_request *request) {
    if (!request) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "request is NULL");
    if (api->in_handler && cumulo_trans_id_equal(&api->handling, &request->trans_id)) {
        if (api->answered)
            return cumulo__fail(api, CUMULO_E_STATE, "request already answered");
    }
    return CUMULO_OK;
}

static void mark_answered(cumulo_api *api, const cumulo_request *request) {
    if (api->in_handler && cumulo_trans_id_equal(&api->handling, &request->trans_id))
        api->answered = true;
}

static int send_return(cumulo_api *api, const cumulo_request *request, uint16_t status,
                       cumulo_bytes info, cumulo_bytes body) {
    int rc = claim_answer(api, request);
    if (rc != CUMULO_OK) return rc;
    cumulo_frame f = {.type = CUMULO_FRAME_RETURN};
    f.u.answer.trans_id = request->trans_id;
    f.u.answer.status = status;
    f.u.answer.response_info = info;
    f.u.answer.response = body;
    rc = cumulo__send_frame(api, &f);
    if (rc == CUMULO_OK) mark_answered(api, request);
    return rc;
}

int cumulo_return(cumulo_api *api, const cumulo_request *request, const void *response_info,
                  size_t response_info_len, const void *response, size_t response_len) {
    if ((response_info_len && !response_info) || (response_len && !response))
        return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "response pointer is NULL");
    return send_return(api, request, CUMULO_OK, (cumulo_bytes){response_info, response_info_len},
                       (cumulo_bytes){response, response_len});
}

int cumulo_return_error(cumulo_api *api, const cumulo_request *request, uint16_t status,
                        const char *message) {
    if (status == CUMULO_OK)
        return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "an error answer needs a non-zero status");
    if (!message) message = cumulo_strerror(status);
    return send_return(api, request, status, (cumulo_bytes){NULL, 0},
                       (cumulo_bytes){(const uint8_t *)message, strlen(message)});
}

int cumulo_forward(cumulo_api *api, const cumulo_request *request, const char *name,
                   const void *request_data, size_t request_len,
                   const cumulo_send_options *options) {
    static const cumulo_send_options no_options;
    int rc = claim_answer(api, request);
    if (rc != CUMULO_OK) return rc;
    if (!options) options = &no_options;
    if (!name || !*name) return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "name is empty");
    if (request_len && !request_data)
        return cumulo__fail(api, CUMULO_INVALID_ARGUMENT, "request is NULL");
    cumulo_frame f = {.type = CUMULO_FRAME_FORWARD};
    f.u.send.trans_id = request->trans_id;
    f.u.send.timeout = options->timeout ? options->timeout : request->timeout;
    f.u.send.priority = options->has_priority ? options->priority : request->priority;
    f.u.send.flags = options->flags;
    f.u.send.name = (cumulo_str){name, strlen(name)};
    f.u.send.request_info = options->request_info;
    f.u.send.request = (cumulo_bytes){request_data, request_len};
    rc = with_trace(api, &f.u.send.request_info);
    if (rc == CUMULO_OK) rc = cumulo__send_frame(api, &f);
    if (rc == CUMULO_OK) mark_answered(api, request);
    return rc;
}

/* ------------------------------------------------------------- dispatch */

/* PROTOCOL.md 5.1: notes the request's traceparent, then its tracestate,
 * as the trace context of its handler (with_trace adds them). */
static void read_trace(cumulo_api *api, cumulo_bytes info) {
    static const char *const keys[2] = {"traceparent", "tracestate"};
    for (size_t i = 0; i < 2; i++) {
        size_t key_len = strlen(keys[i]);
        cumulo_bytes value = {NULL, 0};
        bool found = false;
        if (cumulo_kv_find(info.data, info.len, keys[i], key_len, &value, &found) != CUMULO_OK ||
            !found)
            return;
        api->trace[api->trace_count++] =
            (cumulo_kv){{(const uint8_t *)keys[i], key_len}, value};
    }
}

/* Runs the handler of one REQUEST frame whose bytes stay put meanwhile, then
 * makes sure the request got exactly one answer. */
static int dispatch(cumulo_api *api, const cumulo_frame *f) {
    cumulo_request req = {
        .trans_id = f->u.request.trans_id,
        .timeout = f->u.request.timeout,
        .priority = f->u.request.priority,
        .flags = f->u.request.flags,
        .source = f->u.request.source,
        .name = f->u.request.name,
        .pattern = f->u.request.pattern,
        .request_info = f->u.request.request_info,
        .request = f->u.request.request,
    };
    subscription *sub = find_subscription(api, req.pattern.data, req.pattern.len);
    if (!sub) {
        char message[300];
        snprintf(message, sizeof message, "no handler for pattern '%.*s' in this instance",
                 (int)(req.pattern.len > 200 ? 200 : req.pattern.len), req.pattern.data);
        return cumulo_return_error(api, &req, CUMULO_NO_SERVICE, message);
    }
    api->in_handler = true;
    api->answered = false;
    api->handling = req.trans_id;
    api->trace_count = 0;
    if (req.request_info.len) read_trace(api, req.request_info);
    int rc = sub->handler(api, &req, sub->user_data);
    bool answered = api->answered;
    api->in_handler = false;
    api->trace_count = 0; /* calls after the handler add nothing */
    if (api->fd < 0) return api->closed_status ? api->closed_status : CUMULO_E_CLOSED;
    if (answered) return CUMULO_OK;
    if (rc == CUMULO_OK) return cumulo_return(api, &req, NULL, 0, NULL, 0);
    char message[700];
    snprintf(message, sizeof message, "handler for '%.*s' failed: %s (%s)%s%s",
             (int)(req.pattern.len > 200 ? 200 : req.pattern.len), req.pattern.data,
             cumulo_status_name(rc), cumulo_strerror(rc), api->error[0] ? ": " : "", api->error);
    return cumulo_return_error(api, &req, CUMULO_SERVICE_ERROR, message);
}

/* A REQUEST straight from the read buffer: copy it out first, because the
 * handler may read more frames (send_sync) and so move the read buffer. */
static int dispatch_fresh(cumulo_api *api, const cumulo_frame *f) {
    size_t size = cumulo_frame_size(f);
    if (!cumulo__grow(&api->hbuf, size)) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
    size_t written;
    cumulo_frame_encode(f, api->hbuf.data, api->hbuf.cap, &written);
    cumulo_frame copy;
    cumulo_frame_decode(api->hbuf.data, written, UINT32_MAX, &copy);
    return dispatch(api, &copy);
}

static int run_queued(cumulo_api *api) {
    while (api->requests.head) {
        stored_frame *s = unlink_after(&api->requests, NULL);
        cumulo_frame f;
        decode_stored(s, &f);
        api->error[0] = '\0';
        int rc = dispatch(api, &f);
        free(s);
        if (rc != CUMULO_OK) return rc;
    }
    return CUMULO_OK;
}

int cumulo_poll(cumulo_api *api, int timeout_ms) {
    if (api->in_handler)
        return cumulo__fail(api, CUMULO_E_STATE, "poll cannot run inside a handler");
    int64_t deadline = cumulo__deadline(timeout_ms);
    for (;;) {
        int rc = run_queued(api);
        if (rc != CUMULO_OK) return rc;
        if (api->terminated)
            return cumulo__fail(api, CUMULO_E_TERMINATED, "the core sent TERMINATE");
        cumulo_frame f;
        rc = next_frame(api, deadline, &f);
        if (rc == CUMULO_TIMEOUT) return CUMULO_OK;
        if (rc != CUMULO_OK) return rc;
        if (f.type == CUMULO_FRAME_REQUEST) {
            api->error[0] = '\0';
            rc = dispatch_fresh(api, &f);
        } else {
            rc = set_aside(api, &f);
        }
        if (rc != CUMULO_OK) return rc;
        if (deadline >= 0 && cumulo__now_ms() >= deadline && !api->requests.head &&
            !api->terminated)
            return CUMULO_OK;
    }
}
