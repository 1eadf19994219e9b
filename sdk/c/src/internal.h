/* Internal state of an instance, shared by the transport and session files. */
#ifndef CUMULO_INTERNAL_H
#define CUMULO_INTERNAL_H

#include "cumulo.h"

#include <stdarg.h>

/* Internal functions stay out of the shared library's exported symbols. */
#if defined(__GNUC__)
#define CUMULO_INTERNAL __attribute__((visibility("hidden")))
#else
#define CUMULO_INTERNAL
#endif

/* A growable byte buffer, reused across calls so steady traffic allocates nothing. */
typedef struct growbuf {
    uint8_t *data;
    size_t cap;
} growbuf;

/* A frame copied out of the read buffer (a queued REQUEST or a kept RESPONSE). */
typedef struct stored_frame {
    struct stored_frame *next;
    size_t len;
    uint8_t data[];
} stored_frame;

typedef struct frame_queue {
    stored_frame *head, *tail;
} frame_queue;

typedef struct subscription {
    char *pattern; /* prefix + pattern, as the core sends it in REQUEST.pattern */
    size_t pattern_len;
    uint32_t count; /* local count of SUBSCRIBEs not yet UNSUBSCRIBEd */
    cumulo_handler handler;
    void *user_data;
} subscription;

struct ssl_st;
struct ssl_ctx_st;

struct cumulo_api {
    int fd;             /* -1 once the connection is closed */
    int closed_status;  /* why it closed: returned by later calls */
    struct ssl_st *tls; /* NULL: plain socket; else every byte goes through it */

    /* from HELLO / WELCOME */
    uint32_t thread_index;
    uint32_t node_id, instance_id, process_index, process_count, thread_count;
    uint32_t window, max_frame, timeout_async, timeout_sync, timeout_terminate, keepalive;
    int8_t priority_default;
    char *prefix;
    size_t prefix_len;

    /* read buffer: bytes [rstart, rend) are received and not yet consumed */
    growbuf rbuf;
    size_t rstart, rend;
    growbuf wbuf;      /* encoded outgoing frame */
    growbuf hbuf;      /* copy of the REQUEST whose handler runs */
    growbuf scratch;   /* pattern/prefix concatenation, messages */

    frame_queue requests;   /* REQUESTs that arrived while waiting for something else */
    frame_queue responses;  /* RESPONSEs not claimed yet */
    stored_frame *collected; /* last RESPONSE handed out by recv_async */

    subscription *subs;
    size_t subs_len, subs_cap;

    cumulo_trans_id *mcast_ids;
    size_t mcast_cap;

    uint32_t next_req_id;
    uint64_t last_trans_ns;

    bool in_handler, answered, terminated;
    cumulo_trans_id handling; /* trans_id of the request whose handler runs */

    /* PROTOCOL.md 5.1, the trace context of the request whose handler runs:
     * its traceparent and then its tracestate pair (views into that request),
     * trace_count 0 when it has none or no handler runs. Kept in the instance:
     * an instance belongs to one thread and runs one handler at a time, so
     * this is per handler invocation. trace_info holds an outgoing
     * request_info with the pairs appended. */
    cumulo_kv trace[2];
    size_t trace_count;
    growbuf trace_info;

    char error[512];
};

/* Fills api->error and returns status. */
CUMULO_INTERNAL int cumulo__fail(cumulo_api *api, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
CUMULO_INTERNAL int cumulo__vfail(cumulo_api *api, int status, const char *fmt, va_list args);

/* Closes the connection for good; later calls return status. */
CUMULO_INTERNAL int cumulo__close(cumulo_api *api, int status);

CUMULO_INTERNAL bool cumulo__grow(growbuf *b, size_t need);

/* Milliseconds on a monotonic clock; deadlines are absolute, -1 = none. */
CUMULO_INTERNAL int64_t cumulo__now_ms(void);
CUMULO_INTERNAL int64_t cumulo__deadline(int timeout_ms);

/* Opens the socket named by spec (path or tcp://host:port). */
CUMULO_INTERNAL int cumulo__open_socket(cumulo_api *api, const char *spec, int *fd);

/* Waits until the socket is ready for events (POLLIN, POLLOUT) or the
 * deadline passes (CUMULO_TIMEOUT); closes the connection if poll fails. */
CUMULO_INTERNAL int cumulo__wait_fd(cumulo_api *api, short events, int64_t deadline);

/* TLS (tls.c). The context from the config or the environment: *ctx stays
 * NULL when no CA file is given (plain TCP). */
CUMULO_INTERNAL int cumulo__tls_context(cumulo_api *api, const cumulo_config *config,
                                        struct ssl_ctx_st **ctx);
CUMULO_INTERNAL void cumulo__tls_context_free(struct ssl_ctx_st *ctx);
/* Handshake over api->fd (made non-blocking), verifying the core's
 * certificate against the host of hostport ("host:port"). */
CUMULO_INTERNAL int cumulo__tls_start(cumulo_api *api, struct ssl_ctx_st *ctx,
                                      const char *hostport, int64_t deadline);
/* notify: send close_notify first (a connection still in good order). */
CUMULO_INTERNAL void cumulo__tls_free(cumulo_api *api, bool notify);
/* Some bytes into buf (*got > 0), CUMULO_TIMEOUT at the deadline, or an
 * error that closed the connection. */
CUMULO_INTERNAL int cumulo__tls_read(cumulo_api *api, uint8_t *buf, size_t cap, int64_t deadline,
                                     size_t *got);
CUMULO_INTERNAL int cumulo__tls_write(cumulo_api *api, const uint8_t *data, size_t len);

/* Encodes and writes one frame; frames over max_frame are refused unsent. */
CUMULO_INTERNAL int cumulo__send_frame(cumulo_api *api, const cumulo_frame *frame);

/* Reads the next whole frame (views valid until the next read); CUMULO_TIMEOUT
 * at the deadline. Refuses frames over max_frame by closing the connection. */
CUMULO_INTERNAL int cumulo__read_frame(cumulo_api *api, int64_t deadline, cumulo_frame *frame);

#endif
