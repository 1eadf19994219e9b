/* Faulty service: the boom handler fails (C has no exceptions: it returns an
 * error status without answering), ok answers "ok". The trace_* handlers call
 * /echo/trace with an empty request_info and answer with the request_info the
 * echo got (its response_info), to show the trace context they inherit
 * (PROTOCOL.md 5.1); trace_forward forwards, and the echo answers. */
#include "cumulo.h"

#include <stdio.h>

#define ECHO "/echo/trace"

static int boom(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)api, (void)request, (void)user_data;
    return CUMULO_INVALID_ARGUMENT;
}

static int ok(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    return cumulo_return(api, request, NULL, 0, "ok", 2);
}

/* Answers with the echo's response_info as the body. */
static int echoed(cumulo_api *api, const cumulo_request *request, const cumulo_response *response) {
    if (response->status != CUMULO_OK) return response->status;
    return cumulo_return(api, request, NULL, 0, response->response_info.data,
                         response->response_info.len);
}

static int trace_sync(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    cumulo_response response;
    int rc = cumulo_send_sync(api, ECHO, NULL, 0, NULL, &response);
    return rc != CUMULO_OK ? rc : echoed(api, request, &response);
}

static int trace_async(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    cumulo_trans_id tid;
    cumulo_response response;
    int rc = cumulo_send_async(api, ECHO, NULL, 0, NULL, &tid);
    if (rc == CUMULO_OK) rc = cumulo_recv_async(api, &tid, -1, &response);
    return rc != CUMULO_OK ? rc : echoed(api, request, &response);
}

static int trace_mcast(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    const cumulo_trans_id *ids = NULL;
    size_t count = 0;
    cumulo_response response;
    int rc = cumulo_mcast_async(api, ECHO, NULL, 0, NULL, &ids, &count);
    if (rc != CUMULO_OK) return rc;
    if (count == 0) return CUMULO_NO_SERVICE;
    cumulo_trans_id first = ids[0];
    rc = cumulo_recv_async(api, &first, -1, &response);
    return rc != CUMULO_OK ? rc : echoed(api, request, &response);
}

static int trace_forward(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    return cumulo_forward(api, request, ECHO, request->request.data, request->request.len, NULL);
}

static int setup(cumulo_api *api, void *user_data) {
    (void)user_data;
    static const struct {
        const char *pattern;
        cumulo_handler handler;
    } handlers[] = {
        {"boom", boom},
        {"ok", ok},
        {"trace_sync", trace_sync},
        {"trace_async", trace_async},
        {"trace_mcast", trace_mcast},
        {"trace_forward", trace_forward},
    };
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++) {
        int rc = cumulo_subscribe(api, handlers[i].pattern, handlers[i].handler, NULL);
        if (rc != CUMULO_OK) return rc;
    }
    return CUMULO_OK;
}

int main(void) {
    int rc = cumulo_run(NULL, 0, setup, NULL);
    if (rc != CUMULO_OK) fprintf(stderr, "faulty: %s\n", cumulo_strerror(rc));
    return rc == CUMULO_OK ? 0 : 1;
}
