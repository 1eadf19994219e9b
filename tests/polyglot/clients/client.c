/* Unmanaged client: client SOCKET NAME HEX_BODY [sync|async]
 *
 * Prints the hex response_info, a newline and the response body; on an error
 * status prints its name, a newline and the message, and exits 3. */
#include "cumulo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *hex, unsigned char *out, size_t *len) {
    size_t n = strlen(hex);
    if (n % 2) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (unsigned char)v;
    }
    *len = n / 2;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s SOCKET NAME HEX_BODY [sync|async]\n", argv[0]);
        return 2;
    }
    size_t body_len = 0;
    unsigned char *body = malloc(strlen(argv[3]) / 2 + 1);
    if (!body || unhex(argv[3], body, &body_len) != 0) {
        fprintf(stderr, "bad hex body\n");
        return 2;
    }
    bool async = argc > 4 && strcmp(argv[4], "async") == 0;

    char error[256];
    cumulo_api *api;
    int rc = cumulo_connect_unmanaged(&api, argv[1], "/client/c/", error, sizeof error);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "connect: %s\n", error);
        return 1;
    }
    cumulo_response r;
    memset(&r, 0, sizeof r);
    if (async) {
        cumulo_trans_id id;
        rc = cumulo_send_async(api, argv[2], body, body_len, NULL, &id);
        if (rc == CUMULO_OK) rc = cumulo_recv_async(api, &id, -1, &r);
        if (rc == CUMULO_OK) rc = r.status;
    } else {
        rc = cumulo_send_sync(api, argv[2], body, body_len, NULL, &r);
    }
    int exit_code = 0;
    if (rc == CUMULO_OK) {
        for (size_t i = 0; i < r.response_info.len; i++) printf("%02x", r.response_info.data[i]);
        printf("\n");
        fwrite(r.response.data, 1, r.response.len, stdout);
    } else if (rc > 0) { /* a status of the protocol: the message is the response */
        printf("%s\n", cumulo_status_name(rc));
        fwrite(r.response.data, 1, r.response.len, stdout);
        exit_code = 3;
    } else {
        fprintf(stderr, "%s: %s\n", cumulo_strerror(rc), cumulo_error_message(api));
        exit_code = 1;
    }
    cumulo_destroy(api);
    free(body);
    return exit_code;
}
