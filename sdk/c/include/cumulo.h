/*
 * cumulo C SDK: a service instance speaking the cumulo wire protocol v1
 * (proto/PROTOCOL.md).
 *
 * Threading: a `cumulo_api` instance is one connection and belongs to one thread.
 * Never share an instance between threads; open one per thread (see
 * cumulo_run, which does exactly that). Free functions (codec, key/value
 * helpers, status names) are thread-safe.
 *
 * Memory: views returned by the library (cumulo_bytes, cumulo_str, request and
 * response fields) point into buffers owned by the instance or by the input
 * you passed; they stay valid until the next call on the same instance (for a
 * handler's request: until the handler returns). Copy what you keep.
 */
#ifndef CUMULO_H
#define CUMULO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUMULO_PROTOCOL_VERSION 1
#define CUMULO_DEFAULT_MAX_FRAME (8u * 1024u * 1024u)
/* How much larger than max_frame a frame from the core may be: a REQUEST
   adds source (8 bytes) and pattern (2 + up to 65535 bytes). */
#define CUMULO_REQUEST_OVERHEAD (8u + 2u + 65535u)

/* ------------------------------------------------------------------ status */

/* Every call returns a status. 0..13 are the protocol's codes (PROTOCOL 2.3);
 * the core may send codes unknown here, which are passed through unchanged.
 * Negative codes come from the SDK itself and never travel on the wire. */
enum cumulo_status {
    CUMULO_OK = 0,
    CUMULO_TIMEOUT = 1,
    CUMULO_NO_SERVICE = 2,
    CUMULO_QUEUE_FULL = 3,
    CUMULO_CRASHED = 4,
    CUMULO_MALFORMED = 5,
    CUMULO_SHUTTING_DOWN = 6,
    CUMULO_SERVICE_ERROR = 7,
    CUMULO_TOO_LARGE = 8,
    CUMULO_INVALID_ARGUMENT = 9,
    CUMULO_UNSUPPORTED_VERSION = 10,
    CUMULO_UNAUTHORIZED = 11,
    CUMULO_PROTOCOL = 12,
    CUMULO_UNAVAILABLE = 13,

    CUMULO_E_IO = -1,          /* a socket call failed (see errno text in the message) */
    CUMULO_E_CLOSED = -2,      /* the core closed the connection */
    CUMULO_E_NOMEM = -3,       /* out of memory */
    CUMULO_E_CONFIG = -4,      /* missing or invalid connection settings */
    CUMULO_E_TERMINATED = -5,  /* poll: the core sent TERMINATE; finish and destroy */
    CUMULO_E_INCOMPLETE = -6,  /* codec: more bytes are needed for a whole frame */
    CUMULO_E_STATE = -7,       /* call not allowed now (e.g. answering a request twice) */
};

/* "TIMEOUT", "NO_SERVICE", ...; "UNKNOWN" for codes not listed above. */
const char *cumulo_status_name(int status);
/* A one-line English description of the status. */
const char *cumulo_strerror(int status);

/* ------------------------------------------------------------------- views */

typedef struct cumulo_bytes {
    const uint8_t *data;
    size_t len;
} cumulo_bytes;

/* UTF-8 text, not NUL-terminated. */
typedef struct cumulo_str {
    const char *data;
    size_t len;
} cumulo_str;

typedef struct cumulo_trans_id {
    uint8_t bytes[16];
} cumulo_trans_id;

/* ------------------------------------------------------------ frame codec */

enum cumulo_frame_type {
    CUMULO_FRAME_HELLO = 0x01,
    CUMULO_FRAME_SUBSCRIBE = 0x02,
    CUMULO_FRAME_UNSUBSCRIBE = 0x03,
    CUMULO_FRAME_SUBSCRIBE_COUNT = 0x04,
    CUMULO_FRAME_SEND_ASYNC = 0x10,
    CUMULO_FRAME_SEND_SYNC = 0x11,
    CUMULO_FRAME_MCAST_ASYNC = 0x12,
    CUMULO_FRAME_RETURN = 0x20,
    CUMULO_FRAME_FORWARD = 0x21,
    CUMULO_FRAME_PING = 0x30,
    CUMULO_FRAME_PONG = 0x31,
    CUMULO_FRAME_GOODBYE = 0x32,
    CUMULO_FRAME_WELCOME = 0x81,
    CUMULO_FRAME_REQUEST = 0x82,
    CUMULO_FRAME_RESPONSE = 0x83,
    CUMULO_FRAME_REPLY = 0x84,
    CUMULO_FRAME_MCAST_SENT = 0x85,
    CUMULO_FRAME_TERMINATE = 0x86,
    CUMULO_FRAME_ERROR = 0x87,
};

#define CUMULO_SEND_WAIT_FOR_SERVICE 0x01u /* SEND_* flags bit 0 */
#define CUMULO_REQUEST_SYNC 0x01u          /* REQUEST flags bit 0 */
#define CUMULO_REQUEST_MCAST 0x02u         /* REQUEST flags bit 1 */

/* One decoded frame. Which member of `u` is set depends on `type`:
 * hello; control (SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE_COUNT); send (SEND_ASYNC,
 * SEND_SYNC, MCAST_ASYNC, FORWARD); answer (RETURN, RESPONSE); ping (PING,
 * PONG); welcome; request; reply; mcast_sent; terminate; error. GOODBYE has
 * no fields. Views point into the decoded buffer. */
typedef struct cumulo_frame {
    uint8_t type;
    union {
        struct {
            uint16_t version;
            uint32_t window, thread_index;
            cumulo_str token, prefix;
        } hello;
        struct {
            uint32_t req_id;
            cumulo_str pattern;
        } control;
        struct {
            cumulo_trans_id trans_id;
            uint32_t timeout;
            int8_t priority;
            uint8_t flags;
            cumulo_str name;
            cumulo_bytes request_info, request;
        } send;
        struct {
            cumulo_trans_id trans_id;
            uint16_t status;
            cumulo_bytes response_info, response;
        } answer;
        struct {
            uint64_t nonce;
        } ping;
        struct {
            uint16_t version;
            uint32_t node_id, instance_id, process_index, process_count, thread_count;
            uint32_t window, max_frame, timeout_async, timeout_sync, timeout_terminate;
            int8_t priority_default;
            uint32_t keepalive;
            cumulo_str prefix;
        } welcome;
        struct {
            cumulo_trans_id trans_id;
            uint32_t timeout;
            int8_t priority;
            uint8_t flags;
            uint64_t source;
            cumulo_str name, pattern;
            cumulo_bytes request_info, request;
        } request;
        struct {
            uint32_t req_id;
            uint16_t status;
            uint32_t value;
            cumulo_str message;
        } reply;
        struct {
            cumulo_trans_id trans_id;
            uint32_t count;
            const uint8_t *trans_ids; /* count * 16 bytes */
        } mcast_sent;
        struct {
            uint32_t timeout;
        } terminate;
        struct {
            uint16_t status;
            cumulo_str message;
        } error;
    } u;
} cumulo_frame;

/* Reads the length prefix at the start of `buf`. On CUMULO_OK sets *frame_len
 * to the whole frame's size (length prefix included). CUMULO_E_INCOMPLETE if
 * fewer than 4 bytes are there, CUMULO_MALFORMED for a zero length,
 * CUMULO_TOO_LARGE if the length is over max_frame. */
int cumulo_frame_header(const uint8_t *buf, size_t len, uint32_t max_frame, size_t *frame_len);

/* Decodes exactly one whole frame occupying all of buf[0..len). Anything
 * missing, left over, unknown or invalid is CUMULO_MALFORMED; a length over
 * max_frame is CUMULO_TOO_LARGE. Never reads outside buf. */
int cumulo_frame_decode(const uint8_t *buf, size_t len, uint32_t max_frame, cumulo_frame *out);

/* Size of the encoded frame, or 0 if a field cannot be encoded (unknown
 * type, str over 65535 bytes or not UTF-8, frame over 4 GiB). */
size_t cumulo_frame_size(const cumulo_frame *frame);

/* Encodes into out[0..cap). Sets *written. CUMULO_INVALID_ARGUMENT if the
 * frame cannot be encoded, CUMULO_TOO_LARGE if cap is too small. */
int cumulo_frame_encode(const cumulo_frame *frame, uint8_t *out, size_t cap, size_t *written);

/* Strict UTF-8 check (no overlong forms, surrogates or code points over U+10FFFF). */
bool cumulo_utf8_valid(const uint8_t *s, size_t len);

/* ------------------------------------------------ key/value (PROTOCOL 5) */

typedef struct cumulo_kv {
    cumulo_bytes key;
    cumulo_bytes value;
} cumulo_kv;

/* Iterates pairs: start with *offset = 0. Returns true and sets *pair for
 * each pair; false at the end, or where the buffer turns malformed (check
 * with cumulo_kv_validate first to tell the two apart). Only reads
 * buf[0..len); no NUL terminator after the buffer is assumed. */
bool cumulo_kv_next(const uint8_t *buf, size_t len, size_t *offset, cumulo_kv *pair);

/* Checks the whole buffer: CUMULO_OK or CUMULO_MALFORMED; *count (optional)
 * receives the number of pairs. */
int cumulo_kv_validate(const uint8_t *buf, size_t len, size_t *count);

/* Parses into pairs[0..max_pairs). *count receives the total number of pairs,
 * which may exceed max_pairs (then only the first max_pairs are stored).
 * CUMULO_MALFORMED if the buffer is malformed (nothing is stored then). */
int cumulo_kv_parse(const uint8_t *buf, size_t len, cumulo_kv *pairs, size_t max_pairs,
                    size_t *count);

/* Finds the first value of key (key_len bytes): CUMULO_OK with *found set
 * (and *value when found), or CUMULO_MALFORMED for a malformed buffer. */
int cumulo_kv_find(const uint8_t *buf, size_t len, const char *key, size_t key_len,
                   cumulo_bytes *value, bool *found);

/* Encodes pairs as key\0value\0... into out[0..cap). *needed receives the
 * encoded size even when cap is too small (then CUMULO_TOO_LARGE and nothing
 * useful is written; pass out = NULL, cap = 0 to measure). A key or value
 * holding a NUL byte is CUMULO_INVALID_ARGUMENT. */
int cumulo_kv_encode(const cumulo_kv *pairs, size_t count, uint8_t *out, size_t cap,
                     size_t *needed);

/* -------------------------------------------------------------- instance */

typedef struct cumulo_api cumulo_api;

/* Connection settings. Zero/NULL fields take their value from the environment
 * the core gives a process (CUMULO_SOCKET, CUMULO_TOKEN, CUMULO_PREFIX, and
 * CUMULO_TLS_CA, CUMULO_TLS_CERT, CUMULO_TLS_KEY). */
typedef struct cumulo_config {
    const char *socket;    /* Unix socket path or "tcp://host:port" */
    const char *token;     /* "" for an unmanaged instance */
    const char *prefix;    /* unmanaged instances only, must start with "/" */
    uint32_t thread_index; /* 0 .. thread_count-1 */
    uint32_t window;       /* requests handled at once; 0 means 1 */
    /* TLS to a tcp:// address (ignored for a Unix socket): a PEM file of the
     * CA(s) the core's certificate must be signed by (it turns TLS on; ""
     * turns it off whatever the environment says), and a client certificate
     * and its key (PEM) for a core that asks for one: both or neither. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
} cumulo_config;

/* Connects, sends HELLO and waits for WELCOME. config may be NULL (all from
 * the environment). On failure *out is NULL and, if error is not NULL, a
 * NUL-terminated explanation (the core's ERROR message when it sent one) is
 * written to error[0..error_len). */
int cumulo_connect(cumulo_api **out, const cumulo_config *config, char *error, size_t error_len);

/* Unmanaged instance: explicit socket and prefix, empty token. */
int cumulo_connect_unmanaged(cumulo_api **out, const char *socket, const char *prefix,
                             char *error, size_t error_len);

/* Handshake over an already connected stream socket, which the instance then
 * owns (closes on failure and in cumulo_destroy). No TLS: the bytes go over
 * fd as they are. */
int cumulo_connect_fd(cumulo_api **out, int fd, const cumulo_config *config, char *error,
                      size_t error_len);

/* Sends GOODBYE (if still connected), closes and frees. NULL is allowed. */
void cumulo_destroy(cumulo_api *api);

/* Text of the last error on this instance (the core's message or the SDK's
 * explanation); "" if none. Valid until the next call. */
const char *cumulo_error_message(const cumulo_api *api);

/* Accessors (values from WELCOME). */
uint32_t cumulo_process_index(const cumulo_api *api);
uint32_t cumulo_process_count(const cumulo_api *api);
uint32_t cumulo_thread_count(const cumulo_api *api);
uint32_t cumulo_thread_index(const cumulo_api *api);
cumulo_str cumulo_prefix(const cumulo_api *api); /* also NUL-terminated */
uint32_t cumulo_timeout_async(const cumulo_api *api);
uint32_t cumulo_timeout_sync(const cumulo_api *api);
uint32_t cumulo_timeout_terminate(const cumulo_api *api);
int8_t cumulo_priority_default(const cumulo_api *api);
uint32_t cumulo_node_id(const cumulo_api *api);
uint32_t cumulo_instance_id(const cumulo_api *api);
uint32_t cumulo_window(const cumulo_api *api);
uint32_t cumulo_max_frame(const cumulo_api *api);
uint32_t cumulo_keepalive(const cumulo_api *api);
int cumulo_fd(const cumulo_api *api);

/* A request delivered to a handler. Views are valid until the handler returns. */
typedef struct cumulo_request {
    cumulo_trans_id trans_id;
    uint32_t timeout; /* ms left */
    int8_t priority;
    uint8_t flags;    /* CUMULO_REQUEST_SYNC, CUMULO_REQUEST_MCAST */
    uint64_t source;  /* node_id << 32 | instance_id; 0 = the core */
    cumulo_str name;
    cumulo_str pattern; /* full pattern, prefix included */
    cumulo_bytes request_info;
    cumulo_bytes request;
} cumulo_request;

/* A handler answers with cumulo_return / cumulo_return_error / cumulo_forward
 * and returns CUMULO_OK. If it returns a non-zero status without answering,
 * the SDK sends RETURN with SERVICE_ERROR (7) and a message naming that
 * status; if it returns CUMULO_OK without answering, the SDK sends an empty OK
 * answer. Either way every request gets exactly one answer. */
typedef int (*cumulo_handler)(cumulo_api *api, const cumulo_request *request, void *user_data);

/* SUBSCRIBE prefix+pattern and remember handler for it; waits for REPLY. */
int cumulo_subscribe(cumulo_api *api, const char *pattern, cumulo_handler handler,
                     void *user_data);
/* UNSUBSCRIBE one subscription of pattern; waits for REPLY. */
int cumulo_unsubscribe(cumulo_api *api, const char *pattern);
/* SUBSCRIBE_COUNT: how many times this instance subscribed pattern. */
int cumulo_subscribe_count(cumulo_api *api, const char *pattern, uint32_t *count);

/* Optional send settings; NULL or a zeroed struct means: no request_info, the
 * default timeout and priority from WELCOME, no flags. */
typedef struct cumulo_send_options {
    cumulo_bytes request_info;
    uint32_t timeout;     /* ms; 0 = timeout_async / timeout_sync */
    bool has_priority;    /* false = priority_default */
    int8_t priority;
    uint8_t flags;        /* CUMULO_SEND_WAIT_FOR_SERVICE */
} cumulo_send_options;

/* A RESPONSE. Views are valid until the next call on the instance. */
typedef struct cumulo_response {
    cumulo_trans_id trans_id;
    uint16_t status;              /* the answer's status; message in `response` if non-zero */
    cumulo_bytes response_info;
    cumulo_bytes response;
} cumulo_response;

/* SEND_ASYNC; *trans_id (optional) receives the new request's id. */
int cumulo_send_async(cumulo_api *api, const char *name, const void *request, size_t request_len,
                      const cumulo_send_options *options, cumulo_trans_id *trans_id);

/* SEND_SYNC and wait for its RESPONSE (answering PING, keeping other
 * RESPONSEs and queueing REQUESTs meanwhile). Returns the response's status
 * (CUMULO_OK on success) or an SDK error; *response (optional) is filled
 * whenever a RESPONSE arrived. Waits until the core answers: the core ends
 * every accepted request with a RESPONSE, at the latest on its timeout. */
int cumulo_send_sync(cumulo_api *api, const char *name, const void *request, size_t request_len,
                     const cumulo_send_options *options, cumulo_response *response);

/* MCAST_ASYNC and wait for MCAST_SENT. *trans_ids points to *count ids owned
 * by the instance (valid until the next call); collect each copy's answer
 * with cumulo_recv_async. */
int cumulo_mcast_async(cumulo_api *api, const char *name, const void *request, size_t request_len,
                       const cumulo_send_options *options, const cumulo_trans_id **trans_ids,
                       size_t *count);

/* Collects the RESPONSE of trans_id (or, when trans_id is NULL, the oldest
 * kept one), waiting up to timeout_ms (-1 = no limit). Returns CUMULO_OK when
 * a RESPONSE was collected (its own status is in response->status), or
 * CUMULO_TIMEOUT when none arrived in time, or an SDK error. */
int cumulo_recv_async(cumulo_api *api, const cumulo_trans_id *trans_id, int timeout_ms,
                      cumulo_response *response);

/* From within a handler: RETURN the request with status OK. */
int cumulo_return(cumulo_api *api, const cumulo_request *request, const void *response_info,
                  size_t response_info_len, const void *response, size_t response_len);
/* RETURN the request with a non-zero status and a UTF-8 message. */
int cumulo_return_error(cumulo_api *api, const cumulo_request *request, uint16_t status,
                        const char *message);
/* FORWARD the request to another name; the handler must not also return it.
 * options->timeout 0 keeps what is left of the request's timeout. */
int cumulo_forward(cumulo_api *api, const cumulo_request *request, const char *name,
                   const void *request_data, size_t request_len,
                   const cumulo_send_options *options);

/* The event loop: reads frames, runs handlers, answers PING, keeps RESPONSEs,
 * for up to timeout_ms (-1 = until TERMINATE). Returns CUMULO_OK when the
 * time is up, CUMULO_E_TERMINATED once the core sent TERMINATE (queued
 * requests are handled first), or an error. */
int cumulo_poll(cumulo_api *api, int timeout_ms);

/* -------------------------------------------------------- process helper */

/* Called in each thread once its instance is connected: subscribe here. A
 * non-zero return stops that thread. */
typedef int (*cumulo_setup)(cumulo_api *api, void *user_data);

/* Runs a whole process: starts thread_count threads (0 = CUMULO_THREAD_COUNT,
 * else 1), each connecting its own instance with thread_index = its number
 * (other settings from config, or the environment when NULL), calling setup,
 * then polling until TERMINATE. Returns CUMULO_OK if every thread ended on
 * TERMINATE, else the first error (reported on stderr). */
int cumulo_run(const cumulo_config *config, uint32_t thread_count, cumulo_setup setup,
               void *user_data);

/* ----------------------------------------------------------- trans_ids */

/* Lower-case hex, 32 digits and a NUL: out must hold 33 bytes. */
void cumulo_trans_id_hex(const cumulo_trans_id *id, char out[33]);
bool cumulo_trans_id_equal(const cumulo_trans_id *a, const cumulo_trans_id *b);

#ifdef __cplusplus
}
#endif

#endif /* CUMULO_H */
