/* Status codes: names and descriptions (PROTOCOL.md section 2.3 plus the
 * SDK's own negative codes). */
#include "cumulo.h"

typedef struct status_text {
    int code;
    const char *name;
    const char *text;
} status_text;

static const status_text STATUSES[] = {
    {CUMULO_OK, "OK", "success"},
    {CUMULO_TIMEOUT, "TIMEOUT", "no response within the request's timeout"},
    {CUMULO_NO_SERVICE, "NO_SERVICE", "no instance subscribes a pattern matching the name"},
    {CUMULO_QUEUE_FULL, "QUEUE_FULL", "the destination's queue is at its limit"},
    {CUMULO_CRASHED, "CRASHED", "the instance handling the request went away before answering"},
    {CUMULO_MALFORMED, "MALFORMED", "the frame or one of its fields is invalid"},
    {CUMULO_SHUTTING_DOWN, "SHUTTING_DOWN", "the core or the service is stopping"},
    {CUMULO_SERVICE_ERROR, "SERVICE_ERROR", "the receiving service's handler failed"},
    {CUMULO_TOO_LARGE, "TOO_LARGE", "a frame or message is over its size limit"},
    {CUMULO_INVALID_ARGUMENT, "INVALID_ARGUMENT", "a field has a value out of range"},
    {CUMULO_UNSUPPORTED_VERSION, "UNSUPPORTED_VERSION", "the protocol version is not supported"},
    {CUMULO_UNAUTHORIZED, "UNAUTHORIZED", "unknown token, or unmanaged instances are refused"},
    {CUMULO_PROTOCOL, "PROTOCOL", "a frame arrived out of order"},
    {CUMULO_UNAVAILABLE, "UNAVAILABLE", "the service has no instance to take the request now (given up, or starting)"},
    {CUMULO_E_IO, "E_IO", "a socket operation failed"},
    {CUMULO_E_CLOSED, "E_CLOSED", "the connection to the core is closed"},
    {CUMULO_E_NOMEM, "E_NOMEM", "out of memory"},
    {CUMULO_E_CONFIG, "E_CONFIG", "missing or invalid connection settings"},
    {CUMULO_E_TERMINATED, "E_TERMINATED", "the core asked this instance to terminate"},
    {CUMULO_E_INCOMPLETE, "E_INCOMPLETE", "more bytes are needed for a whole frame"},
    {CUMULO_E_STATE, "E_STATE", "the call is not allowed in the current state"},
};

static const status_text *find(int status) {
    for (size_t i = 0; i < sizeof STATUSES / sizeof STATUSES[0]; i++)
        if (STATUSES[i].code == status) return &STATUSES[i];
    return NULL;
}

const char *cumulo_status_name(int status) {
    const status_text *s = find(status);
    return s ? s->name : "UNKNOWN";
}

const char *cumulo_strerror(int status) {
    const status_text *s = find(status);
    return s ? s->text : "unknown status code";
}
