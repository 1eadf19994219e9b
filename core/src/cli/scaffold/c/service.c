/* {{name}}: a cumulo service. Subscribes {{name}}/get under its prefix and
 * answers "hello from {{name}}", with the request's "value" parameter when
 * it has one. Runs CUMULO_THREAD_COUNT instances, one per thread. */
#include "cumulo.h"

#include <stdio.h>

static const char TEXT[] = "content-type\0text/plain; charset=utf-8\0";

static int get(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    char body[512];
    int len;
    cumulo_bytes value;
    bool found = false;
    if (cumulo_kv_find(request->request.data, request->request.len, "value", 5, &value, &found) == CUMULO_OK &&
        found)
        len = snprintf(body, sizeof body, "hello from {{name}} (value %.*s)", (int)value.len,
                       (const char *)value.data);
    else
        len = snprintf(body, sizeof body, "hello from {{name}}");
    if (len >= (int)sizeof body) len = (int)sizeof body - 1; /* truncated */
    return cumulo_return(api, request, TEXT, sizeof TEXT - 1, body, (size_t)len);
}

static int setup(cumulo_api *api, void *user_data) {
    (void)user_data;
    return cumulo_subscribe(api, "{{name}}/get", get, NULL);
}

int main(void) {
    int rc = cumulo_run(NULL, 0, setup, NULL);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "{{name}}: %s\n", cumulo_strerror(rc));
        return 1;
    }
    return 0;
}
