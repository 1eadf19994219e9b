/* Session tests: the SDK against a scripted fake core over real sockets
 * (socketpair, Unix socket, TCP). Each test is one CTest case:
 * `test_session NAME`. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cumulo.h"
#include "fake_core.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

CHECK_DEFINE_COUNTER;

#define MIB (1024u * 1024u)

/* ------------------------------------------------------------ harness */

typedef void (*core_script)(fake_core *fc, void *arg);

typedef struct core_thread {
    pthread_t thread;
    fake_core fc;
    core_script script;
    void *arg;
} core_thread;

static void *core_main(void *p) {
    core_thread *ct = p;
    ct->script(&ct->fc, ct->arg);
    return NULL;
}

static void start_core(core_thread *ct, int fd, core_script script, void *arg) {
    fc_init(&ct->fc, fd);
    ct->script = script;
    ct->arg = arg;
    pthread_create(&ct->thread, NULL, core_main, ct);
}

static void join_core(core_thread *ct) {
    pthread_join(ct->thread, NULL);
    fc_close(&ct->fc);
}

/* Connects an instance over a socketpair to a fake core running script. */
static int connect_pair(core_thread *ct, core_script script, void *arg,
                        const cumulo_config *config, cumulo_api **api, char *error, size_t error_len) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    start_core(ct, sv[1], script, arg);
    return cumulo_connect_fd(api, sv[0], config, error, error_len);
}

static const cumulo_config UNMANAGED = {.token = "", .prefix = "/p/"};

static bool tid_has_instance(const cumulo_trans_id *tid, uint32_t node, uint32_t instance) {
    uint32_t n = (uint32_t)tid->bytes[8] << 24 | (uint32_t)tid->bytes[9] << 16 |
                 (uint32_t)tid->bytes[10] << 8 | tid->bytes[11];
    uint32_t i = (uint32_t)tid->bytes[12] << 24 | (uint32_t)tid->bytes[13] << 16 |
                 (uint32_t)tid->bytes[14] << 8 | tid->bytes[15];
    return n == node && i == instance;
}

/* A handler's view of what happened, shared with the test body. */
typedef struct handler_log {
    int calls;
    int second_answer_status;
} handler_log;

/* ---------------------------------------------------------- handshake */

static void core_handshake(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame hello;
    if (fc_expect(fc, CUMULO_FRAME_HELLO, &hello)) {
        CHECK_EQ_INT(hello.u.hello.version, 1);
        CHECK_EQ_INT(hello.u.hello.window, 4);
        CHECK_EQ_INT(hello.u.hello.thread_index, 2);
        CHECK_VIEW(hello.u.hello.token.data, hello.u.hello.token.len, "c0ffee");
        CHECK_VIEW(hello.u.hello.prefix.data, hello.u.hello.prefix.len, "");
    }
    cumulo_frame w = {.type = CUMULO_FRAME_WELCOME};
    w.u.welcome = (__typeof__(w.u.welcome)){
        .version = 1, .node_id = 0x01020304, .instance_id = 0x0a0b0c0d, .process_index = 2,
        .process_count = 4, .thread_count = 3, .window = 4, .max_frame = 4096,
        .timeout_async = 1111, .timeout_sync = 2222, .timeout_terminate = 3333,
        .priority_default = -3, .keepalive = 1500, .prefix = {"/svc/", 5}};
    fc_send(fc, &w);
    CHECK(fc_eof(fc));
}

static void test_handshake(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    char error[256];
    cumulo_config config = {.token = "c0ffee", .thread_index = 2, .window = 4};
    CHECK_STATUS(connect_pair(&ct, core_handshake, NULL, &config, &api, error, sizeof error),
                 CUMULO_OK);
    if (api) {
        CHECK_EQ_INT(cumulo_node_id(api), 0x01020304);
        CHECK_EQ_INT(cumulo_instance_id(api), 0x0a0b0c0d);
        CHECK_EQ_INT(cumulo_process_index(api), 2);
        CHECK_EQ_INT(cumulo_process_count(api), 4);
        CHECK_EQ_INT(cumulo_thread_count(api), 3);
        CHECK_EQ_INT(cumulo_thread_index(api), 2);
        CHECK_EQ_INT(cumulo_window(api), 4);
        CHECK_EQ_INT(cumulo_max_frame(api), 4096);
        CHECK_EQ_INT(cumulo_timeout_async(api), 1111);
        CHECK_EQ_INT(cumulo_timeout_sync(api), 2222);
        CHECK_EQ_INT(cumulo_timeout_terminate(api), 3333);
        CHECK_EQ_INT(cumulo_priority_default(api), -3);
        CHECK_EQ_INT(cumulo_keepalive(api), 1500);
        cumulo_str prefix = cumulo_prefix(api);
        CHECK_VIEW(prefix.data, prefix.len, "/svc/");
        CHECK(strcmp(prefix.data, "/svc/") == 0);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

static void core_refuse(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame hello;
    fc_expect(fc, CUMULO_FRAME_HELLO, &hello);
    cumulo_frame e = {.type = CUMULO_FRAME_ERROR};
    e.u.error.status = CUMULO_UNAUTHORIZED;
    e.u.error.message = (cumulo_str){"unknown token", 13};
    fc_send(fc, &e);
    CHECK(fc_eof(fc));
}

static void core_expect_nothing(fake_core *fc, void *arg) {
    (void)arg;
    CHECK(fc_eof(fc));
}

static void test_handshake_refused(void) {
    core_thread ct;
    cumulo_api *api = (cumulo_api *)&ct; /* must be reset to NULL on failure */
    char error[256] = "";
    cumulo_config config = {.token = "bad"};
    CHECK_STATUS(connect_pair(&ct, core_refuse, NULL, &config, &api, error, sizeof error),
                 CUMULO_UNAUTHORIZED);
    CHECK(api == NULL);
    CHECK(strstr(error, "unknown token") != NULL);
    join_core(&ct);

    /* an unmanaged instance without a proper prefix never sends HELLO */
    cumulo_config no_prefix = {.token = "", .prefix = "no-slash"};
    CHECK_STATUS(connect_pair(&ct, core_expect_nothing, NULL, &no_prefix, &api, error, sizeof error),
                 CUMULO_E_CONFIG);
    CHECK(strstr(error, "prefix") != NULL);
    join_core(&ct);

    /* bad socket settings */
    CHECK_STATUS(cumulo_connect_unmanaged(&api, "tcp://no-port", "/p/", error, sizeof error),
                 CUMULO_E_CONFIG);
    CHECK_STATUS(cumulo_connect_unmanaged(&api, "/nonexistent/cumulo.sock", "/p/", error,
                                          sizeof error),
                 CUMULO_E_IO);
    CHECK(strstr(error, "/nonexistent/cumulo.sock") != NULL);
}

/* ----------------------------------------------------------- subscribe */

static void core_subscribe(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    uint32_t ids[5];
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f)) {
        CHECK_VIEW(f.u.control.pattern.data, f.u.control.pattern.len, "a/get");
        ids[0] = f.u.control.req_id;
    }
    /* a PING before the REPLY must be answered while subscribe waits */
    fc_send_simple(fc, CUMULO_FRAME_PING);
    if (fc_expect(fc, CUMULO_FRAME_PONG, &f)) CHECK_EQ_INT(f.u.ping.nonce, 77);
    fc_send_reply(fc, ids[0], CUMULO_OK, 0, "");
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f)) ids[1] = f.u.control.req_id;
    fc_send_reply(fc, ids[1], CUMULO_OK, 0, "");
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE_COUNT, &f)) {
        CHECK_VIEW(f.u.control.pattern.data, f.u.control.pattern.len, "a/get");
        ids[2] = f.u.control.req_id;
    }
    fc_send_reply(fc, 999, CUMULO_OK, 5, ""); /* a stray REPLY is ignored */
    fc_send_reply(fc, ids[2], CUMULO_OK, 2, "");
    if (fc_expect(fc, CUMULO_FRAME_UNSUBSCRIBE, &f)) {
        CHECK_VIEW(f.u.control.pattern.data, f.u.control.pattern.len, "zzz");
        ids[3] = f.u.control.req_id;
    }
    fc_send_reply(fc, ids[3], CUMULO_INVALID_ARGUMENT, 0, "pattern 'zzz' is not subscribed");
    if (fc_expect(fc, CUMULO_FRAME_UNSUBSCRIBE, &f)) ids[4] = f.u.control.req_id;
    fc_send_reply(fc, ids[4], CUMULO_OK, 0, "");
    CHECK(ids[0] != ids[1] && ids[1] != ids[2] && ids[2] != ids[3] && ids[3] != ids[4]);
    CHECK(fc_eof(fc));
}

static int noop_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    (void)api, (void)req, (void)user_data;
    return CUMULO_OK;
}

static void test_subscribe(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    CHECK_STATUS(connect_pair(&ct, core_subscribe, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (api) {
        CHECK_STATUS(cumulo_subscribe(api, "a/get", noop_handler, NULL), CUMULO_OK);
        CHECK_STATUS(cumulo_subscribe(api, "a/get", noop_handler, NULL), CUMULO_OK);
        uint32_t count = 0;
        CHECK_STATUS(cumulo_subscribe_count(api, "a/get", &count), CUMULO_OK);
        CHECK_EQ_INT(count, 2);
        CHECK_STATUS(cumulo_unsubscribe(api, "zzz"), CUMULO_INVALID_ARGUMENT);
        CHECK(strstr(cumulo_error_message(api), "'zzz' is not subscribed") != NULL);
        CHECK_STATUS(cumulo_unsubscribe(api, "a/get"), CUMULO_OK);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

/* ------------------------------------------------- request and return */

static int echo_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    handler_log *log = user_data;
    log->calls++;
    if (req->request.len == 6 && memcmp(req->request.data, "silent", 6) == 0) return CUMULO_OK;
    CHECK_VIEW(req->name.data, req->name.len, "/p/x/get");
    CHECK_VIEW(req->pattern.data, req->pattern.len, "/p/x/get");
    CHECK_EQ_INT(req->timeout, 3000);
    CHECK_EQ_INT(req->priority, -1);
    CHECK_EQ_INT(req->flags, CUMULO_REQUEST_SYNC);
    CHECK(req->source == (((uint64_t)3 << 32) | 1));
    cumulo_bytes value;
    bool found = false;
    CHECK_STATUS(cumulo_kv_find(req->request.data, req->request.len, "value", 5, &value, &found),
                 CUMULO_OK);
    CHECK(found);
    char body[64];
    int n = snprintf(body, sizeof body, "got %.*s", found ? (int)value.len : 0,
                     found ? (const char *)value.data : "");
    static const char info[] = "content-type\0text/plain\0";
    int rc = cumulo_return(api, req, info, sizeof info - 1, body, (size_t)n);
    log->second_answer_status = cumulo_return(api, req, NULL, 0, "again", 5);
    return rc;
}

static void core_request(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f)) {
        CHECK_VIEW(f.u.control.pattern.data, f.u.control.pattern.len, "x/get");
        fc_send_reply(fc, f.u.control.req_id, CUMULO_OK, 0, "");
    }
    cumulo_trans_id t1 = fc_tid(1), t2 = fc_tid(2), t3 = fc_tid(3);
    static const char body[] = "value\00042\0";
    fc_send_request(fc, &t1, "/p/x/get", "/p/x/get", "k\0v\0", 4, body, sizeof body - 1);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &t1));
        CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
        CHECK(f.u.answer.response_info.len == 24 &&
              memcmp(f.u.answer.response_info.data, "content-type\0text/plain\0", 24) == 0);
        CHECK_VIEW(f.u.answer.response.data, f.u.answer.response.len, "got 42");
    }
    /* a handler that answers nothing gives an empty OK */
    fc_send_request(fc, &t2, "/p/x/get", "/p/x/get", "", 0, "silent", 6);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &t2));
        CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
        CHECK_EQ_INT(f.u.answer.response.len, 0);
    }
    /* a pattern this instance has no handler for */
    fc_send_request(fc, &t3, "/p/other", "/p/other", "", 0, "", 0);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &t3));
        CHECK_EQ_INT(f.u.answer.status, CUMULO_NO_SERVICE);
    }
    fc_send_simple(fc, CUMULO_FRAME_TERMINATE);
    CHECK(fc_eof(fc));
}

static void test_request_return(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    handler_log log = {0};
    CHECK_STATUS(connect_pair(&ct, core_request, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (api) {
        CHECK_STATUS(cumulo_subscribe(api, "x/get", echo_handler, &log), CUMULO_OK);
        CHECK_STATUS(cumulo_poll(api, 10000), CUMULO_E_TERMINATED);
        CHECK_EQ_INT(log.calls, 2);
        CHECK_STATUS(log.second_answer_status, CUMULO_E_STATE);
        /* poll keeps saying so */
        CHECK_STATUS(cumulo_poll(api, 0), CUMULO_E_TERMINATED);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

/* ----------------------------------------------------- handler errors */

static int failing_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    handler_log *log = user_data;
    log->calls++;
    if (req->request.len == 4 && memcmp(req->request.data, "fail", 4) == 0)
        return CUMULO_INVALID_ARGUMENT;
    if (req->request.len == 6 && memcmp(req->request.data, "custom", 6) == 0)
        return cumulo_return_error(api, req, CUMULO_SERVICE_ERROR, "bad input: custom");
    return cumulo_return(api, req, NULL, 0, "fine", 4);
}

static void core_handler_error(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f))
        fc_send_reply(fc, f.u.control.req_id, CUMULO_OK, 0, "");
    cumulo_trans_id t1 = fc_tid(1), t2 = fc_tid(2), t3 = fc_tid(3);
    fc_send_request(fc, &t1, "/p/x/get", "/p/x/get", "", 0, "fail", 4);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &t1));
        CHECK_EQ_INT(f.u.answer.status, CUMULO_SERVICE_ERROR);
        char message[512];
        snprintf(message, sizeof message, "%.*s", (int)f.u.answer.response.len,
                 (const char *)f.u.answer.response.data);
        CHECK(strstr(message, "/p/x/get") != NULL);
        CHECK(strstr(message, "INVALID_ARGUMENT") != NULL);
        CHECK(cumulo_utf8_valid(f.u.answer.response.data, f.u.answer.response.len));
    }
    fc_send_request(fc, &t2, "/p/x/get", "/p/x/get", "", 0, "custom", 6);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK_EQ_INT(f.u.answer.status, CUMULO_SERVICE_ERROR);
        CHECK_VIEW(f.u.answer.response.data, f.u.answer.response.len, "bad input: custom");
    }
    /* the instance keeps serving */
    fc_send_request(fc, &t3, "/p/x/get", "/p/x/get", "", 0, "ok", 2);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
        CHECK_VIEW(f.u.answer.response.data, f.u.answer.response.len, "fine");
    }
    fc_send_simple(fc, CUMULO_FRAME_TERMINATE);
    CHECK(fc_eof(fc));
}

static void test_handler_error(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    handler_log log = {0};
    CHECK_STATUS(connect_pair(&ct, core_handler_error, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (api) {
        CHECK_STATUS(cumulo_subscribe(api, "x/get", failing_handler, &log), CUMULO_OK);
        CHECK_STATUS(cumulo_poll(api, 10000), CUMULO_E_TERMINATED);
        CHECK_EQ_INT(log.calls, 3);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

/* -------------------------------------------- send_sync while waiting */

static int counting_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    handler_log *log = user_data;
    log->calls++;
    return cumulo_return(api, req, NULL, 0, req->request.data, req->request.len);
}

static void core_send_sync(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f))
        fc_send_reply(fc, f.u.control.req_id, CUMULO_OK, 0, "");
    cumulo_trans_id async_tid = {{0}}, sync_tid = {{0}}, failing_tid = {{0}};
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) {
        async_tid = f.u.send.trans_id;
        CHECK(tid_has_instance(&async_tid, 3, 9));
        CHECK_EQ_INT(f.u.send.timeout, 4000); /* timeout_async from WELCOME */
        CHECK_EQ_INT(f.u.send.priority, 2);   /* priority_default */
        CHECK_EQ_INT(f.u.send.flags, 0);
        CHECK_VIEW(f.u.send.name.data, f.u.send.name.len, "/svc/a");
        CHECK_VIEW(f.u.send.request.data, f.u.send.request.len, "first");
    }
    if (fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) {
        sync_tid = f.u.send.trans_id;
        CHECK(memcmp(sync_tid.bytes, async_tid.bytes, 16) > 0);
        CHECK_EQ_INT(f.u.send.timeout, 1234);
        CHECK_EQ_INT(f.u.send.priority, -5);
        CHECK_EQ_INT(f.u.send.flags, CUMULO_SEND_WAIT_FOR_SERVICE);
        CHECK_VIEW(f.u.send.name.data, f.u.send.name.len, "/svc/b");
        CHECK_VIEW(f.u.send.request_info.data, f.u.send.request_info.len, "trace");
        CHECK_VIEW(f.u.send.request.data, f.u.send.request.len, "second");
    }
    /* While send_sync waits: a PING, an unrelated RESPONSE and a REQUEST. */
    fc_send_simple(fc, CUMULO_FRAME_PING);
    fc_send_response(fc, &async_tid, CUMULO_OK, "", 0, "async answer", 12);
    cumulo_trans_id req_tid = fc_tid(5);
    fc_send_request(fc, &req_tid, "/p/x/get", "/p/x/get", "", 0, "queued", 6);
    if (fc_expect(fc, CUMULO_FRAME_PONG, &f)) CHECK_EQ_INT(f.u.ping.nonce, 77);
    fc_send_response(fc, &sync_tid, CUMULO_OK, "k\0v\0", 4, "sync answer", 11);

    if (fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) {
        failing_tid = f.u.send.trans_id;
        CHECK_EQ_INT(f.u.send.timeout, 6000); /* timeout_sync from WELCOME */
    }
    static const char msg[] = "no service subscribes /nowhere";
    fc_send_response(fc, &failing_tid, CUMULO_NO_SERVICE, "", 0, msg, sizeof msg - 1);

    /* the queued REQUEST is handled by the next poll */
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.answer.trans_id, &req_tid));
        CHECK_VIEW(f.u.answer.response.data, f.u.answer.response.len, "queued");
    }
    fc_send_simple(fc, CUMULO_FRAME_TERMINATE);
    CHECK(fc_eof(fc));
}

static void test_send_sync(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    handler_log log = {0};
    CHECK_STATUS(connect_pair(&ct, core_send_sync, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (!api) {
        join_core(&ct);
        return;
    }
    CHECK_STATUS(cumulo_subscribe(api, "x/get", counting_handler, &log), CUMULO_OK);
    cumulo_trans_id async_tid;
    CHECK_STATUS(cumulo_send_async(api, "/svc/a", "first", 5, NULL, &async_tid), CUMULO_OK);
    cumulo_send_options options = {.request_info = {(const uint8_t *)"trace", 5},
                                   .timeout = 1234, .has_priority = true, .priority = -5,
                                   .flags = CUMULO_SEND_WAIT_FOR_SERVICE};
    cumulo_response response;
    CHECK_STATUS(cumulo_send_sync(api, "/svc/b", "second", 6, &options, &response), CUMULO_OK);
    CHECK_EQ_INT(response.status, CUMULO_OK);
    CHECK_VIEW(response.response.data, response.response.len, "sync answer");
    CHECK(response.response_info.len == 4 && memcmp(response.response_info.data, "k\0v\0", 4) == 0);
    CHECK_EQ_INT(log.calls, 0); /* the REQUEST waits for poll */

    CHECK_STATUS(cumulo_send_sync(api, "/nowhere", "", 0, NULL, &response), CUMULO_NO_SERVICE);
    CHECK_EQ_INT(response.status, CUMULO_NO_SERVICE);
    CHECK(strstr(cumulo_error_message(api), "no service subscribes /nowhere") != NULL);

    CHECK_STATUS(cumulo_recv_async(api, &async_tid, 0, &response), CUMULO_OK);
    CHECK(cumulo_trans_id_equal(&response.trans_id, &async_tid));
    CHECK_VIEW(response.response.data, response.response.len, "async answer");
    CHECK_STATUS(cumulo_recv_async(api, NULL, 0, &response), CUMULO_TIMEOUT);

    CHECK_STATUS(cumulo_poll(api, 10000), CUMULO_E_TERMINATED);
    CHECK_EQ_INT(log.calls, 1);
    cumulo_destroy(api);
    join_core(&ct);
}

/* ------------------------------------------------------ frame limits */

static void core_too_large(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", 1024);
    /* the oversized send never reaches the wire: the next frame is the small one */
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f))
        CHECK_VIEW(f.u.send.request.data, f.u.send.request.len, "small");
    /* a frame of exactly the limit is fine: length = 27 + 997 = 1024 */
    cumulo_trans_id tid = f.u.send.trans_id;
    char *body = malloc(997);
    memset(body, 'b', 997);
    fc_send_response(fc, &tid, CUMULO_OK, "", 0, body, 997);
    free(body);
    /* then one over the receive limit (max_frame + CUMULO_REQUEST_OVERHEAD
       = 66569): refused without reading the body */
    static const uint8_t header[] = {0x00, 0x00, 0x02, 0x00, 0x83, 1, 2, 3};
    fc_send_raw(fc, header, sizeof header);
    CHECK(fc_eof(fc));
}

static void test_too_large(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    CHECK_STATUS(connect_pair(&ct, core_too_large, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (!api) {
        join_core(&ct);
        return;
    }
    char *big = calloc(1, 2000);
    CHECK_STATUS(cumulo_send_async(api, "/svc/a", big, 2000, NULL, NULL), CUMULO_TOO_LARGE);
    CHECK(strstr(cumulo_error_message(api), "limit of 1024") != NULL);
    free(big);
    cumulo_trans_id tid;
    CHECK_STATUS(cumulo_send_async(api, "/svc/a", "small", 5, NULL, &tid), CUMULO_OK);
    cumulo_response response;
    CHECK_STATUS(cumulo_recv_async(api, &tid, 5000, &response), CUMULO_OK);
    CHECK_EQ_INT(response.response.len, 997);
    CHECK_STATUS(cumulo_poll(api, 5000), CUMULO_TOO_LARGE);
    CHECK(cumulo_fd(api) < 0); /* the connection is closed */
    CHECK(cumulo_send_async(api, "/svc/a", "x", 1, NULL, NULL) != CUMULO_OK);
    cumulo_destroy(api);
    join_core(&ct);
}

/* A large response and request go through the growing buffers intact. */
static void core_large(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", 16 * MIB);
    if (!fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) return;
    CHECK_EQ_INT(f.u.send.request.len, 1 * MIB);
    bool same = true;
    for (size_t i = 0; i < f.u.send.request.len; i++)
        if (f.u.send.request.data[i] != (uint8_t)(i % 251)) same = false;
    CHECK(same);
    cumulo_trans_id tid = f.u.send.trans_id;
    size_t n = 3 * MIB + 17;
    uint8_t *body = malloc(n);
    for (size_t i = 0; i < n; i++) body[i] = (uint8_t)(i % 253);
    fc_send_response(fc, &tid, CUMULO_OK, "", 0, body, n);
    free(body);
    CHECK(fc_eof(fc));
}

static void test_large_frames(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    CHECK_STATUS(connect_pair(&ct, core_large, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (api) {
        uint8_t *request = malloc(MIB);
        for (size_t i = 0; i < MIB; i++) request[i] = (uint8_t)(i % 251);
        cumulo_response response;
        CHECK_STATUS(cumulo_send_sync(api, "/svc/big", request, MIB, NULL, &response), CUMULO_OK);
        CHECK_EQ_INT(response.response.len, 3 * MIB + 17);
        bool same = true;
        for (size_t i = 0; i < response.response.len; i++)
            if (response.response.data[i] != (uint8_t)(i % 253)) same = false;
        CHECK(same);
        free(request);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

/* -------------------------------------------------- mcast and forward */

static int forwarding_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    handler_log *log = user_data;
    log->calls++;
    int rc = cumulo_forward(api, req, "/other", "forwarded", 9, NULL);
    /* forwarding answers the request: returning it too is refused */
    log->second_answer_status = cumulo_return(api, req, NULL, 0, "", 0);
    return rc;
}

static void core_mcast_forward(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f))
        fc_send_reply(fc, f.u.control.req_id, CUMULO_OK, 0, "");
    if (fc_expect(fc, CUMULO_FRAME_MCAST_ASYNC, &f)) {
        CHECK_VIEW(f.u.send.name.data, f.u.send.name.len, "/svc/*");
        cumulo_trans_id copies[2] = {fc_tid(10), fc_tid(20)};
        cumulo_frame sent = {.type = CUMULO_FRAME_MCAST_SENT};
        sent.u.mcast_sent.trans_id = f.u.send.trans_id;
        sent.u.mcast_sent.count = 2;
        sent.u.mcast_sent.trans_ids = copies[0].bytes;
        fc_send(fc, &sent);
        fc_send_response(fc, &copies[1], CUMULO_OK, "", 0, "from 20", 7);
        fc_send_response(fc, &copies[0], CUMULO_OK, "", 0, "from 10", 7);
    }
    cumulo_trans_id tid = fc_tid(30);
    fc_send_request(fc, &tid, "/p/fwd/x", "/p/fwd/*", "", 0, "original", 8);
    if (fc_expect(fc, CUMULO_FRAME_FORWARD, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.send.trans_id, &tid));
        CHECK_VIEW(f.u.send.name.data, f.u.send.name.len, "/other");
        CHECK_VIEW(f.u.send.request.data, f.u.send.request.len, "forwarded");
        CHECK_EQ_INT(f.u.send.timeout, 3000); /* what is left of the request's */
        CHECK_EQ_INT(f.u.send.priority, -1);  /* the request's own */
    }
    fc_send_simple(fc, CUMULO_FRAME_TERMINATE);
    CHECK(fc_eof(fc)); /* no RETURN after the FORWARD */
}

static void test_mcast_forward(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    handler_log log = {0};
    CHECK_STATUS(connect_pair(&ct, core_mcast_forward, NULL, &UNMANAGED, &api, NULL, 0),
                 CUMULO_OK);
    if (!api) {
        join_core(&ct);
        return;
    }
    CHECK_STATUS(cumulo_subscribe(api, "fwd/*", forwarding_handler, &log), CUMULO_OK);
    const cumulo_trans_id *ids = NULL;
    size_t count = 0;
    CHECK_STATUS(cumulo_mcast_async(api, "/svc/*", "hi", 2, NULL, &ids, &count), CUMULO_OK);
    CHECK_EQ_INT(count, 2);
    cumulo_trans_id first = fc_tid(10), second = fc_tid(20);
    if (count == 2) {
        CHECK(cumulo_trans_id_equal(&ids[0], &first));
        CHECK(cumulo_trans_id_equal(&ids[1], &second));
    }
    cumulo_response response;
    CHECK_STATUS(cumulo_recv_async(api, NULL, 5000, &response), CUMULO_OK);
    CHECK(cumulo_trans_id_equal(&response.trans_id, &second)); /* oldest arrival first */
    CHECK_VIEW(response.response.data, response.response.len, "from 20");
    CHECK_STATUS(cumulo_recv_async(api, &first, 5000, &response), CUMULO_OK);
    CHECK_VIEW(response.response.data, response.response.len, "from 10");
    CHECK_STATUS(cumulo_poll(api, 10000), CUMULO_E_TERMINATED);
    CHECK_EQ_INT(log.calls, 1);
    CHECK_STATUS(log.second_answer_status, CUMULO_E_STATE);
    cumulo_destroy(api);
    join_core(&ct);
}

/* ------------------------------------------- trace context (PROTOCOL 5.1) */

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TS "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
#define TRACE_PAIRS "traceparent\0" TP "\0tracestate\0" TS "\0"

/* A view holding exactly the bytes of a string literal (NULs included). */
#define CHECK_INFO(b, lit)                                                               \
    CHECK((b).len == sizeof(lit) - 1 && ((b).len == 0 || memcmp((b).data, lit, (b).len) == 0))

static cumulo_send_options info_options(const char *info, size_t len) {
    cumulo_send_options o = {.request_info = {(const uint8_t *)info, len}};
    return o;
}

/* Its calls show what each outgoing request_info inherits: the request's
 * body names the case. */
static int trace_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    handler_log *log = user_data;
    log->calls++;
    cumulo_send_options given = info_options("a\0b\0", 4);
    if (req->request.len == 3 && memcmp(req->request.data, "all", 3) == 0) {
        cumulo_response response;
        CHECK_STATUS(cumulo_send_sync(api, "/svc/sync", "", 0, &given, &response), CUMULO_OK);
        CHECK_STATUS(cumulo_send_async(api, "/svc/async", "", 0, NULL, NULL), CUMULO_OK);
        const cumulo_trans_id *ids = NULL;
        size_t count = 0;
        CHECK_STATUS(cumulo_mcast_async(api, "/svc/*", "", 0, NULL, &ids, &count), CUMULO_OK);
        static const char own[] = "traceparent\0mine\0";
        cumulo_send_options own_options = info_options(own, sizeof own - 1);
        CHECK_STATUS(cumulo_send_async(api, "/svc/own", "", 0, &own_options, NULL), CUMULO_OK);
        return cumulo_forward(api, req, "/svc/fwd", "", 0, &given);
    }
    CHECK_STATUS(cumulo_send_async(api, "/svc/one", "", 0, &given, NULL), CUMULO_OK);
    if (req->request.len == 4 && memcmp(req->request.data, "fail", 4) == 0)
        return CUMULO_INVALID_ARGUMENT;
    return CUMULO_OK;
}

static void core_trace_context(fake_core *fc, void *arg) {
    (void)arg;
    cumulo_frame f;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SUBSCRIBE, &f))
        fc_send_reply(fc, f.u.control.req_id, CUMULO_OK, 0, "");
    /* outside any handler: nothing added */
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) CHECK_INFO(f.u.send.request_info, "");

    /* R with traceparent and tracestate: each kind of call inherits both,
       after the pairs the handler gave; a handler's own traceparent is kept */
    static const char traced[] = "k\0v\0" TRACE_PAIRS;
    cumulo_trans_id t1 = fc_tid(1);
    fc_send_request(fc, &t1, "/p/tr/x", "/p/tr/*", traced, sizeof traced - 1, "all", 3);
    if (fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) {
        CHECK_INFO(f.u.send.request_info, "a\0b\0" TRACE_PAIRS);
        cumulo_trans_id tid = f.u.send.trans_id;
        fc_send_response(fc, &tid, CUMULO_OK, "", 0, "", 0);
    }
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f))
        CHECK_INFO(f.u.send.request_info, TRACE_PAIRS);
    if (fc_expect(fc, CUMULO_FRAME_MCAST_ASYNC, &f)) {
        CHECK_INFO(f.u.send.request_info, TRACE_PAIRS);
        cumulo_frame sent = {.type = CUMULO_FRAME_MCAST_SENT};
        sent.u.mcast_sent.trans_id = f.u.send.trans_id;
        fc_send(fc, &sent);
    }
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f))
        CHECK_INFO(f.u.send.request_info, "traceparent\0mine\0");
    if (fc_expect(fc, CUMULO_FRAME_FORWARD, &f)) {
        CHECK(cumulo_trans_id_equal(&f.u.send.trans_id, &t1));
        CHECK_INFO(f.u.send.request_info, "a\0b\0" TRACE_PAIRS);
    }

    /* traceparent without tracestate: only traceparent */
    static const char parent_only[] = "traceparent\0" TP "\0";
    cumulo_trans_id t2 = fc_tid(2);
    fc_send_request(fc, &t2, "/p/tr/x", "/p/tr/*", parent_only, sizeof parent_only - 1, "", 0);
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f))
        CHECK_INFO(f.u.send.request_info, "a\0b\0traceparent\0" TP "\0");
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);

    /* R without traceparent (a tracestate alone, other pairs, nothing): nothing added */
    static const char no_parent[] = "tracestate\0" TS "\0k\0v\0";
    cumulo_trans_id t3 = fc_tid(3), t4 = fc_tid(4);
    fc_send_request(fc, &t3, "/p/tr/x", "/p/tr/*", no_parent, sizeof no_parent - 1, "", 0);
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) CHECK_INFO(f.u.send.request_info, "a\0b\0");
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
    fc_send_request(fc, &t4, "/p/tr/x", "/p/tr/*", "", 0, "", 0);
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) CHECK_INFO(f.u.send.request_info, "a\0b\0");
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f)) CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);

    /* a failing handler's calls inherit too; its context ends with it */
    cumulo_trans_id t5 = fc_tid(5);
    fc_send_request(fc, &t5, "/p/tr/x", "/p/tr/*", traced, sizeof traced - 1, "fail", 4);
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f))
        CHECK_INFO(f.u.send.request_info, "a\0b\0" TRACE_PAIRS);
    if (fc_expect(fc, CUMULO_FRAME_RETURN, &f))
        CHECK_EQ_INT(f.u.answer.status, CUMULO_SERVICE_ERROR);
    fc_send_simple(fc, CUMULO_FRAME_TERMINATE);
    /* after the handlers: nothing added */
    if (fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) CHECK_INFO(f.u.send.request_info, "");
    CHECK(fc_eof(fc));
}

static void test_trace_context(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    handler_log log = {0};
    CHECK_STATUS(connect_pair(&ct, core_trace_context, NULL, &UNMANAGED, &api, NULL, 0),
                 CUMULO_OK);
    if (!api) {
        join_core(&ct);
        return;
    }
    CHECK_STATUS(cumulo_subscribe(api, "tr/*", trace_handler, &log), CUMULO_OK);
    CHECK_STATUS(cumulo_send_async(api, "/svc/before", "", 0, NULL, NULL), CUMULO_OK);
    CHECK_STATUS(cumulo_poll(api, 10000), CUMULO_E_TERMINATED);
    CHECK_EQ_INT(log.calls, 5);
    CHECK_STATUS(cumulo_send_async(api, "/svc/after", "", 0, NULL, NULL), CUMULO_OK);
    cumulo_destroy(api);
    join_core(&ct);
}

/* ----------------------------------------------- core errors, trans_id */

static void core_error(fake_core *fc, void *arg) {
    (void)arg;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    cumulo_frame e = {.type = CUMULO_FRAME_ERROR};
    e.u.error.status = CUMULO_SHUTTING_DOWN;
    e.u.error.message = (cumulo_str){"core is stopping", 16};
    fc_send(fc, &e);
    CHECK(fc_eof(fc));
}

static void test_core_error(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    CHECK_STATUS(connect_pair(&ct, core_error, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    if (api) {
        CHECK_STATUS(cumulo_poll(api, 5000), CUMULO_SHUTTING_DOWN);
        CHECK(strstr(cumulo_error_message(api), "core is stopping") != NULL);
        CHECK(cumulo_poll(api, 0) != CUMULO_OK);
    }
    cumulo_destroy(api);
    join_core(&ct);
}

#define TRANS_ID_COUNT 500

static void core_trans_ids(fake_core *fc, void *arg) {
    (void)arg;
    fc_handshake(fc, "/p/", CUMULO_DEFAULT_MAX_FRAME);
    cumulo_trans_id previous = {{0}};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    for (int i = 0; i < TRANS_ID_COUNT; i++) {
        cumulo_frame f;
        if (!fc_expect(fc, CUMULO_FRAME_SEND_ASYNC, &f)) return;
        const cumulo_trans_id *tid = &f.u.send.trans_id;
        CHECK(memcmp(tid->bytes, previous.bytes, 16) > 0);
        CHECK(tid_has_instance(tid, 3, 9));
        uint64_t ns = 0;
        for (int b = 0; b < 8; b++) ns = ns << 8 | tid->bytes[b];
        CHECK(ns + 60000000000ull > now && ns < now + 60000000000ull);
        previous = *tid;
    }
    CHECK(fc_eof(fc));
}

static void test_trans_ids(void) {
    core_thread ct;
    cumulo_api *api = NULL;
    CHECK_STATUS(connect_pair(&ct, core_trans_ids, NULL, &UNMANAGED, &api, NULL, 0), CUMULO_OK);
    for (int i = 0; api && i < TRANS_ID_COUNT; i++)
        CHECK_STATUS(cumulo_send_async(api, "/svc/a", "", 0, NULL, NULL), CUMULO_OK);
    cumulo_destroy(api);
    join_core(&ct);
}

/* -------------------------------------------- Unix and TCP listeners */

typedef struct listener_script {
    int listen_fd;
    const char *expect_prefix;
} listener_script;

static void core_listener(fake_core *fc, void *arg) {
    listener_script *ls = arg;
    fc->fd = accept(ls->listen_fd, NULL, NULL);
    CHECK(fc->fd >= 0);
    if (fc->fd < 0) return;
    cumulo_frame f;
    if (fc_expect(fc, CUMULO_FRAME_HELLO, &f)) {
        CHECK_VIEW(f.u.hello.token.data, f.u.hello.token.len, "");
        CHECK_VIEW(f.u.hello.prefix.data, f.u.hello.prefix.len, ls->expect_prefix);
    }
    fc_welcome(fc, ls->expect_prefix, CUMULO_DEFAULT_MAX_FRAME);
    if (fc_expect(fc, CUMULO_FRAME_SEND_SYNC, &f)) {
        cumulo_trans_id tid = f.u.send.trans_id;
        fc_send_response(fc, &tid, CUMULO_OK, "", 0, "pong", 4);
    }
    CHECK(fc_eof(fc));
}

static void ping_through(cumulo_api *api) {
    cumulo_response response;
    CHECK_STATUS(cumulo_send_sync(api, "/svc/ping", "ping", 4, NULL, &response), CUMULO_OK);
    CHECK_VIEW(response.response.data, response.response.len, "pong");
}

static int listen_unix(char *dir, char *path, size_t path_len) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, path_len, "%s/cumulo.sock", dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(fd, 8) == 0);
    return fd;
}

static void test_unix_tcp(void) {
    char dir[] = "/tmp/cumulo-c-test-XXXXXX", path[256], error[256] = "";
    int unix_fd = listen_unix(dir, path, sizeof path);
    core_thread ct;
    cumulo_api *api = NULL;

    listener_script ls = {unix_fd, "/u/"};
    start_core(&ct, -1, core_listener, &ls);
    CHECK_STATUS(cumulo_connect_unmanaged(&api, path, "/u/", error, sizeof error), CUMULO_OK);
    if (api) ping_through(api);
    cumulo_destroy(api);
    join_core(&ct);

    /* everything from the environment, as for a process the core starts */
    setenv("CUMULO_SOCKET", path, 1);
    setenv("CUMULO_PREFIX", "/env/", 1);
    unsetenv("CUMULO_TOKEN");
    ls.expect_prefix = "/env/";
    start_core(&ct, -1, core_listener, &ls);
    CHECK_STATUS(cumulo_connect(&api, NULL, error, sizeof error), CUMULO_OK);
    if (api) ping_through(api);
    cumulo_destroy(api);
    join_core(&ct);
    close(unix_fd);
    unlink(path);
    rmdir(dir);

    int tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(tcp_fd, (struct sockaddr *)&addr, sizeof addr) == 0);
    CHECK(listen(tcp_fd, 8) == 0);
    socklen_t len = sizeof addr;
    getsockname(tcp_fd, (struct sockaddr *)&addr, &len);
    char spec[64];
    snprintf(spec, sizeof spec, "tcp://127.0.0.1:%u", ntohs(addr.sin_port));
    ls = (listener_script){tcp_fd, "/tcp/"};
    start_core(&ct, -1, core_listener, &ls);
    CHECK_STATUS(cumulo_connect_unmanaged(&api, spec, "/tcp/", error, sizeof error), CUMULO_OK);
    if (api) ping_through(api);
    cumulo_destroy(api);
    join_core(&ct);
    close(tcp_fd);
}

/* ------------------------------------------------- the thread helper */

#define RUN_THREADS 3

static int thread_reply_handler(cumulo_api *api, const cumulo_request *req, void *user_data) {
    (void)user_data;
    char body[32];
    int n = snprintf(body, sizeof body, "thread %u", cumulo_thread_index(api));
    return cumulo_return(api, req, NULL, 0, body, (size_t)n);
}

static int run_setup(cumulo_api *api, void *user_data) {
    atomic_int *setups = user_data;
    atomic_fetch_add(setups, 1);
    return cumulo_subscribe(api, "t/get", thread_reply_handler, NULL);
}

typedef struct runner {
    pthread_t thread;
    cumulo_config config;
    atomic_int setups;
    int status;
} runner;

static void *run_process(void *p) {
    runner *r = p;
    r->status = cumulo_run(&r->config, 0, run_setup, &r->setups);
    return NULL;
}

static void test_run_threads(void) {
    char dir[] = "/tmp/cumulo-c-test-XXXXXX", path[256];
    int listen_fd = listen_unix(dir, path, sizeof path);
    setenv("CUMULO_THREAD_COUNT", "3", 1);
    runner r = {.config = {.socket = path, .token = "", .prefix = "/r/"}, .status = -1000};
    atomic_init(&r.setups, 0);
    pthread_create(&r.thread, NULL, run_process, &r);

    fake_core cores[RUN_THREADS];
    bool seen[RUN_THREADS] = {false};
    for (int i = 0; i < RUN_THREADS; i++) {
        fc_init(&cores[i], accept(listen_fd, NULL, NULL));
        cumulo_frame f;
        if (fc_expect(&cores[i], CUMULO_FRAME_HELLO, &f) && f.u.hello.thread_index < RUN_THREADS)
            seen[f.u.hello.thread_index] = true;
        fc_welcome(&cores[i], "/r/", CUMULO_DEFAULT_MAX_FRAME);
        if (fc_expect(&cores[i], CUMULO_FRAME_SUBSCRIBE, &f))
            fc_send_reply(&cores[i], f.u.control.req_id, CUMULO_OK, 0, "");
    }
    for (int i = 0; i < RUN_THREADS; i++) CHECK(seen[i]);
    for (int i = 0; i < RUN_THREADS; i++) {
        cumulo_trans_id tid = fc_tid((uint8_t)(40 + i));
        fc_send_request(&cores[i], &tid, "/r/t/get", "/r/t/get", "", 0, "", 0);
        cumulo_frame f;
        if (fc_expect(&cores[i], CUMULO_FRAME_RETURN, &f)) {
            CHECK_EQ_INT(f.u.answer.status, CUMULO_OK);
            CHECK(f.u.answer.response.len > 7 && memcmp(f.u.answer.response.data, "thread ", 7) == 0);
        }
        fc_send_simple(&cores[i], CUMULO_FRAME_TERMINATE);
    }
    for (int i = 0; i < RUN_THREADS; i++) {
        CHECK(fc_eof(&cores[i]));
        fc_close(&cores[i]);
    }
    pthread_join(r.thread, NULL);
    CHECK_STATUS(r.status, CUMULO_OK);
    CHECK_EQ_INT(atomic_load(&r.setups), RUN_THREADS);
    close(listen_fd);
    unlink(path);
    rmdir(dir);
}

/* ---------------------------------------------------------------- main */

typedef struct test_case {
    const char *name;
    void (*run)(void);
} test_case;

static const test_case TESTS[] = {
    {"handshake", test_handshake},
    {"handshake_refused", test_handshake_refused},
    {"subscribe", test_subscribe},
    {"request_return", test_request_return},
    {"handler_error", test_handler_error},
    {"send_sync", test_send_sync},
    {"too_large", test_too_large},
    {"large_frames", test_large_frames},
    {"mcast_forward", test_mcast_forward},
    {"trace_context", test_trace_context},
    {"core_error", test_core_error},
    {"trans_ids", test_trans_ids},
    {"unix_tcp", test_unix_tcp},
    {"run_threads", test_run_threads},
};

int main(int argc, char **argv) {
    int ran = 0;
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        if (argc > 1 && strcmp(argv[1], TESTS[i].name) != 0) continue;
        TESTS[i].run();
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return check_report(argc > 1 ? argv[1] : "test_session");
}
