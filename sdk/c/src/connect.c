/* Connection setup (HELLO / WELCOME), teardown and accessors. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The core answers HELLO at once; this only guards against a silent peer. */
#define HANDSHAKE_TIMEOUT_MS 30000

static void copy_error(char *error, size_t error_len, const char *text) {
    if (error && error_len) snprintf(error, error_len, "%s", text);
}

static const char *setting(const char *given, const char *env_name, const char *fallback) {
    if (given) return given;
    const char *env = getenv(env_name);
    return env ? env : fallback;
}

static cumulo_api *new_instance(void) {
    cumulo_api *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->fd = -1;
    api->max_frame = CUMULO_DEFAULT_MAX_FRAME; /* until WELCOME tells the real one */
    api->window = 1;
    api->process_count = 1;
    api->thread_count = 1;
    return api;
}

static int take_welcome(cumulo_api *api, const cumulo_frame *f) {
    if (f->type == CUMULO_FRAME_ERROR)
        return cumulo__fail(api, f->u.error.status ? f->u.error.status : CUMULO_PROTOCOL,
                            "core refused the connection: %s: %.*s",
                            cumulo_status_name(f->u.error.status), (int)f->u.error.message.len,
                            f->u.error.message.data);
    if (f->type != CUMULO_FRAME_WELCOME)
        return cumulo__fail(api, CUMULO_PROTOCOL, "expected WELCOME, got frame type 0x%02x",
                            f->type);
    if (f->u.welcome.version != CUMULO_PROTOCOL_VERSION)
        return cumulo__fail(api, CUMULO_UNSUPPORTED_VERSION, "core speaks protocol version %u",
                            f->u.welcome.version);
    api->node_id = f->u.welcome.node_id;
    api->instance_id = f->u.welcome.instance_id;
    api->process_index = f->u.welcome.process_index;
    api->process_count = f->u.welcome.process_count;
    api->thread_count = f->u.welcome.thread_count;
    api->window = f->u.welcome.window;
    if (f->u.welcome.max_frame) api->max_frame = f->u.welcome.max_frame;
    api->timeout_async = f->u.welcome.timeout_async;
    api->timeout_sync = f->u.welcome.timeout_sync;
    api->timeout_terminate = f->u.welcome.timeout_terminate;
    api->priority_default = f->u.welcome.priority_default;
    api->keepalive = f->u.welcome.keepalive;
    api->prefix = malloc(f->u.welcome.prefix.len + 1);
    if (!api->prefix) return cumulo__fail(api, CUMULO_E_NOMEM, "out of memory");
    memcpy(api->prefix, f->u.welcome.prefix.data, f->u.welcome.prefix.len);
    api->prefix[f->u.welcome.prefix.len] = '\0';
    api->prefix_len = f->u.welcome.prefix.len;
    return CUMULO_OK;
}

static int handshake(cumulo_api *api, const cumulo_config *config) {
    const char *token = setting(config ? config->token : NULL, "CUMULO_TOKEN", "");
    const char *prefix = "";
    if (!*token) {
        prefix = setting(config ? config->prefix : NULL, "CUMULO_PREFIX", "");
        if (prefix[0] != '/')
            return cumulo__fail(api, CUMULO_E_CONFIG,
                                "an unmanaged instance (no token) needs a prefix starting with "
                                "'/', got '%s'",
                                prefix);
    }
    api->thread_index = config ? config->thread_index : 0;
    cumulo_frame hello = {.type = CUMULO_FRAME_HELLO};
    hello.u.hello.version = CUMULO_PROTOCOL_VERSION;
    hello.u.hello.window = config && config->window ? config->window : 1;
    hello.u.hello.thread_index = api->thread_index;
    hello.u.hello.token = (cumulo_str){token, strlen(token)};
    hello.u.hello.prefix = (cumulo_str){prefix, strlen(prefix)};
    int rc = cumulo__send_frame(api, &hello);
    if (rc != CUMULO_OK) return rc;
    cumulo_frame welcome;
    rc = cumulo__read_frame(api, cumulo__deadline(HANDSHAKE_TIMEOUT_MS), &welcome);
    if (rc == CUMULO_TIMEOUT) return cumulo__fail(api, rc, "no WELCOME from the core");
    if (rc != CUMULO_OK) return rc;
    return take_welcome(api, &welcome);
}

/* The handshake over fd (owned from here on), after TLS when tls is given
 * (hostport then names the core, for its certificate). */
static int connect_over(cumulo_api **out, int fd, struct ssl_ctx_st *tls, const char *hostport,
                        const cumulo_config *config, char *error, size_t error_len) {
    *out = NULL;
    cumulo_api *api = new_instance();
    if (!api) {
        close(fd);
        cumulo__tls_context_free(tls);
        copy_error(error, error_len, "out of memory");
        return CUMULO_E_NOMEM;
    }
    api->fd = fd;
    int rc = CUMULO_OK;
    if (tls) {
        rc = cumulo__tls_start(api, tls, hostport, cumulo__deadline(HANDSHAKE_TIMEOUT_MS));
        cumulo__tls_context_free(tls); /* the session keeps what it needs */
    }
    if (rc == CUMULO_OK) rc = handshake(api, config);
    if (rc != CUMULO_OK) {
        copy_error(error, error_len, api->error);
        cumulo__close(api, rc);
        api->fd = -1;
        cumulo_destroy(api);
        return rc;
    }
    *out = api;
    return CUMULO_OK;
}

int cumulo_connect_fd(cumulo_api **out, int fd, const cumulo_config *config, char *error,
                      size_t error_len) {
    return connect_over(out, fd, NULL, NULL, config, error, error_len);
}

int cumulo_connect(cumulo_api **out, const cumulo_config *config, char *error, size_t error_len) {
    *out = NULL;
    cumulo_api probe = {.fd = -1}; /* only collects the error text of a failed connect */
    const char *spec = setting(config ? config->socket : NULL, "CUMULO_SOCKET", NULL);
    bool tcp = spec && strncmp(spec, "tcp://", 6) == 0;
    struct ssl_ctx_st *tls = NULL;
    /* TLS settings first: a bad file is told before any connection is made.
       A Unix socket is local: they do not apply to it. */
    int rc = tcp ? cumulo__tls_context(&probe, config, &tls) : CUMULO_OK;
    int fd = -1;
    if (rc == CUMULO_OK) rc = cumulo__open_socket(&probe, spec, &fd);
    if (rc != CUMULO_OK) {
        cumulo__tls_context_free(tls);
        copy_error(error, error_len, probe.error);
        return rc;
    }
    return connect_over(out, fd, tls, tcp ? spec + 6 : NULL, config, error, error_len);
}

int cumulo_connect_unmanaged(cumulo_api **out, const char *socket, const char *prefix, char *error,
                             size_t error_len) {
    cumulo_config config = {.socket = socket, .token = "", .prefix = prefix};
    if (!socket || !prefix) {
        *out = NULL;
        copy_error(error, error_len, "an unmanaged instance needs a socket and a prefix");
        return CUMULO_E_CONFIG;
    }
    return cumulo_connect(out, &config, error, error_len);
}

static void free_queue(frame_queue *q) {
    for (stored_frame *f = q->head, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    q->head = q->tail = NULL;
}

void cumulo_destroy(cumulo_api *api) {
    if (!api) return;
    if (api->fd >= 0) {
        cumulo_frame goodbye = {.type = CUMULO_FRAME_GOODBYE};
        if (cumulo__send_frame(api, &goodbye) == CUMULO_OK) cumulo__tls_free(api, true);
        cumulo__close(api, CUMULO_E_CLOSED);
    }
    free_queue(&api->requests);
    free_queue(&api->responses);
    free(api->collected);
    for (size_t i = 0; i < api->subs_len; i++) free(api->subs[i].pattern);
    free(api->subs);
    free(api->mcast_ids);
    free(api->rbuf.data);
    free(api->wbuf.data);
    free(api->hbuf.data);
    free(api->scratch.data);
    free(api->trace_info.data);
    free(api->prefix);
    free(api);
}

const char *cumulo_error_message(const cumulo_api *api) { return api ? api->error : ""; }

uint32_t cumulo_process_index(const cumulo_api *api) { return api->process_index; }
uint32_t cumulo_process_count(const cumulo_api *api) { return api->process_count; }
uint32_t cumulo_thread_count(const cumulo_api *api) { return api->thread_count; }
uint32_t cumulo_thread_index(const cumulo_api *api) { return api->thread_index; }
cumulo_str cumulo_prefix(const cumulo_api *api) { return (cumulo_str){api->prefix, api->prefix_len}; }
uint32_t cumulo_timeout_async(const cumulo_api *api) { return api->timeout_async; }
uint32_t cumulo_timeout_sync(const cumulo_api *api) { return api->timeout_sync; }
uint32_t cumulo_timeout_terminate(const cumulo_api *api) { return api->timeout_terminate; }
int8_t cumulo_priority_default(const cumulo_api *api) { return api->priority_default; }
uint32_t cumulo_node_id(const cumulo_api *api) { return api->node_id; }
uint32_t cumulo_instance_id(const cumulo_api *api) { return api->instance_id; }
uint32_t cumulo_window(const cumulo_api *api) { return api->window; }
uint32_t cumulo_max_frame(const cumulo_api *api) { return api->max_frame; }
uint32_t cumulo_keepalive(const cumulo_api *api) { return api->keepalive; }
int cumulo_fd(const cumulo_api *api) { return api->fd; }
