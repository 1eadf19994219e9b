/* The http_req example service (docs/SDK_GUIDE.md): subscribes c.xml/get and
 * answers <http_test><value>N</value></http_test> for an integer "value" in
 * the key/value request body, or an error element otherwise. Runs
 * CUMULO_THREAD_COUNT instances, one per thread. HTTP_REQ_WINDOW: requests the
 * core may deliver to each instance at once (default 1); they are answered in
 * turn, but read and written in batches. */
#include "cumulo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static const char CONTENT_TYPE[] = "content-type\0text/xml; charset=utf-8\0";
static const char NO_VALUE[] = "<http_test><error>no value specified</error></http_test>";

/* Optional sign, then one or more decimal digits, within int64_t. */
static bool parse_int64(const uint8_t *text, size_t len, int64_t *out) {
    size_t i = 0;
    bool negative = false;
    if (i < len && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
    if (i == len) return false;
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t magnitude = 0;
    for (; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return false;
        unsigned digit = (unsigned)(text[i] - '0');
        if (magnitude > (limit - digit) / 10) return false;
        magnitude = magnitude * 10 + digit;
    }
    /* -2^63 has no positive counterpart: negate in unsigned arithmetic */
    *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return true;
}

static int handle_get(cumulo_api *api, const cumulo_request *request, void *user_data) {
    (void)user_data;
    char body[96];
    int body_len;
    cumulo_bytes value;
    bool found = false;
    int64_t number;
    if (cumulo_kv_find(request->request.data, request->request.len, "value", 5, &value, &found) ==
            CUMULO_OK &&
        found && parse_int64(value.data, value.len, &number))
        body_len = snprintf(body, sizeof body, "<http_test><value>%" PRId64 "</value></http_test>",
                            number);
    else
        body_len = snprintf(body, sizeof body, "%s", NO_VALUE);
    return cumulo_return(api, request, CONTENT_TYPE, sizeof CONTENT_TYPE - 1, body,
                         (size_t)body_len);
}

static int setup(cumulo_api *api, void *user_data) {
    (void)user_data;
    return cumulo_subscribe(api, "c.xml/get", handle_get, NULL);
}

/* HTTP_REQ_WINDOW: unset or empty is 1; anything but a positive integer
 * (decimal digits, at most 2^32-1) stops the process. */
static uint32_t window_from_env(void) {
    const char *w = getenv("HTTP_REQ_WINDOW");
    if (!w || !*w) return 1;
    uint64_t n = 0;
    const char *p = w;
    for (; *p >= '0' && *p <= '9' && n <= UINT32_MAX; p++) n = n * 10 + (uint64_t)(*p - '0');
    if (*p || n < 1 || n > UINT32_MAX) {
        fprintf(stderr, "http_req: HTTP_REQ_WINDOW='%s' is not a positive integer\n", w);
        exit(2);
    }
    return (uint32_t)n;
}

int main(void) {
    cumulo_config config = {0};
    config.window = window_from_env();
    int rc = cumulo_run(&config, 0, setup, NULL);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "http_req: %s\n", cumulo_strerror(rc));
        return 1;
    }
    return 0;
}
