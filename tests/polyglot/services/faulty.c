/* Faulty service: the boom handler fails (C has no exceptions: it returns an
 * error status without answering), ok answers "ok". */
#include "cumulo.h"

#include <stdio.h>

static int boom(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)api, (void)request, (void)user_data;
    return CUMULO_INVALID_ARGUMENT;
}

static int ok(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    return cumulo_return(api, request, NULL, 0, "ok", 2);
}

static int setup(cumulo_api *api, void *user_data) {
    (void)user_data;
    int rc = cumulo_subscribe(api, "boom", boom, NULL);
    return rc != CUMULO_OK ? rc : cumulo_subscribe(api, "ok", ok, NULL);
}

int main(void) {
    int rc = cumulo_run(NULL, 0, setup, NULL);
    if (rc != CUMULO_OK) fprintf(stderr, "faulty: %s\n", cumulo_strerror(rc));
    return rc == CUMULO_OK ? 0 : 1;
}
