/* Runs every vector of proto/vectors/ (all .json files): decode hex and compare every
 * field, encode the fields and compare with hex, and reject every invalid
 * entry with the named status. Inputs are copied into exact-size heap
 * buffers so that the sanitizer build catches any read past the end. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include "cumulo.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>

CHECK_DEFINE_COUNTER;

#define INVALID_LIMIT 1024 /* PROTOCOL 8: TOO_LARGE vectors assume this limit */

typedef enum { K_U8, K_I8, K_U16, K_U32, K_U64, K_TID, K_STR, K_BYTES, K_TIDS } kind;

typedef struct field_desc {
    const char *name;
    kind kind;
    size_t offset;
} field_desc;

#define F(name, kind, member) {name, kind, offsetof(cumulo_frame, member)}
#define END {NULL, K_U8, 0}

static const field_desc HELLO[] = {F("version", K_U16, u.hello.version),
                                   F("window", K_U32, u.hello.window),
                                   F("thread_index", K_U32, u.hello.thread_index),
                                   F("token", K_STR, u.hello.token),
                                   F("prefix", K_STR, u.hello.prefix), END};
static const field_desc CONTROL[] = {F("req_id", K_U32, u.control.req_id),
                                     F("pattern", K_STR, u.control.pattern), END};
static const field_desc SEND[] = {F("trans_id", K_TID, u.send.trans_id),
                                  F("timeout", K_U32, u.send.timeout),
                                  F("priority", K_I8, u.send.priority),
                                  F("flags", K_U8, u.send.flags),
                                  F("name", K_STR, u.send.name),
                                  F("request_info", K_BYTES, u.send.request_info),
                                  F("request", K_BYTES, u.send.request), END};
static const field_desc ANSWER[] = {F("trans_id", K_TID, u.answer.trans_id),
                                    F("status", K_U16, u.answer.status),
                                    F("response_info", K_BYTES, u.answer.response_info),
                                    F("response", K_BYTES, u.answer.response), END};
static const field_desc PING[] = {F("nonce", K_U64, u.ping.nonce), END};
static const field_desc NONE[] = {END};
static const field_desc WELCOME[] = {F("version", K_U16, u.welcome.version),
                                     F("node_id", K_U32, u.welcome.node_id),
                                     F("instance_id", K_U32, u.welcome.instance_id),
                                     F("process_index", K_U32, u.welcome.process_index),
                                     F("process_count", K_U32, u.welcome.process_count),
                                     F("thread_count", K_U32, u.welcome.thread_count),
                                     F("window", K_U32, u.welcome.window),
                                     F("max_frame", K_U32, u.welcome.max_frame),
                                     F("timeout_async", K_U32, u.welcome.timeout_async),
                                     F("timeout_sync", K_U32, u.welcome.timeout_sync),
                                     F("timeout_terminate", K_U32, u.welcome.timeout_terminate),
                                     F("priority_default", K_I8, u.welcome.priority_default),
                                     F("keepalive", K_U32, u.welcome.keepalive),
                                     F("prefix", K_STR, u.welcome.prefix), END};
static const field_desc REQUEST[] = {F("trans_id", K_TID, u.request.trans_id),
                                     F("timeout", K_U32, u.request.timeout),
                                     F("priority", K_I8, u.request.priority),
                                     F("flags", K_U8, u.request.flags),
                                     F("source", K_U64, u.request.source),
                                     F("name", K_STR, u.request.name),
                                     F("pattern", K_STR, u.request.pattern),
                                     F("request_info", K_BYTES, u.request.request_info),
                                     F("request", K_BYTES, u.request.request), END};
static const field_desc REPLY[] = {F("req_id", K_U32, u.reply.req_id),
                                   F("status", K_U16, u.reply.status),
                                   F("value", K_U32, u.reply.value),
                                   F("message", K_STR, u.reply.message), END};
static const field_desc MCAST_SENT[] = {F("trans_id", K_TID, u.mcast_sent.trans_id),
                                        F("trans_ids", K_TIDS, u.mcast_sent), END};
static const field_desc TERMINATE[] = {F("timeout", K_U32, u.terminate.timeout), END};
static const field_desc ERROR_[] = {F("status", K_U16, u.error.status),
                                    F("message", K_STR, u.error.message), END};

typedef struct type_desc {
    const char *name;
    uint8_t code;
    const field_desc *fields;
} type_desc;

static const type_desc TYPES[] = {
    {"HELLO", CUMULO_FRAME_HELLO, HELLO},
    {"SUBSCRIBE", CUMULO_FRAME_SUBSCRIBE, CONTROL},
    {"UNSUBSCRIBE", CUMULO_FRAME_UNSUBSCRIBE, CONTROL},
    {"SUBSCRIBE_COUNT", CUMULO_FRAME_SUBSCRIBE_COUNT, CONTROL},
    {"SEND_ASYNC", CUMULO_FRAME_SEND_ASYNC, SEND},
    {"SEND_SYNC", CUMULO_FRAME_SEND_SYNC, SEND},
    {"MCAST_ASYNC", CUMULO_FRAME_MCAST_ASYNC, SEND},
    {"FORWARD", CUMULO_FRAME_FORWARD, SEND},
    {"RETURN", CUMULO_FRAME_RETURN, ANSWER},
    {"RESPONSE", CUMULO_FRAME_RESPONSE, ANSWER},
    {"PING", CUMULO_FRAME_PING, PING},
    {"PONG", CUMULO_FRAME_PONG, PING},
    {"GOODBYE", CUMULO_FRAME_GOODBYE, NONE},
    {"WELCOME", CUMULO_FRAME_WELCOME, WELCOME},
    {"REQUEST", CUMULO_FRAME_REQUEST, REQUEST},
    {"REPLY", CUMULO_FRAME_REPLY, REPLY},
    {"MCAST_SENT", CUMULO_FRAME_MCAST_SENT, MCAST_SENT},
    {"TERMINATE", CUMULO_FRAME_TERMINATE, TERMINATE},
    {"ERROR", CUMULO_FRAME_ERROR, ERROR_},
};

static const type_desc *find_type(const char *name) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (strcmp(TYPES[i].name, name) == 0) return &TYPES[i];
    return NULL;
}

/* ------------------------------------------------------------- helpers */

/* Hex to a freshly allocated buffer of exactly the decoded size (at least 1
 * byte allocated so malloc(0) is never ambiguous). */
static uint8_t *from_hex(const char *hex, size_t *len) {
    size_t n = strlen(hex);
    if (n % 2) return NULL;
    uint8_t *out = malloc(n / 2 ? n / 2 : 1);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            free(out);
            return NULL;
        }
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return out;
}

static bool bytes_equal_hex(const uint8_t *data, size_t len, const char *hex) {
    size_t want_len;
    uint8_t *want = from_hex(hex, &want_len);
    bool same = want && want_len == len && (len == 0 || memcmp(data, want, len) == 0);
    free(want);
    return same;
}

/* cJSON holds numbers as doubles, exact only below 2^53. To compare u64
 * fields exactly, integers of 16 or more digits outside strings are turned
 * into JSON strings before parsing, and read back with strtoull. */
static char *quote_big_integers(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n * 2 + 1), *o = out;
    bool in_string = false;
    for (size_t i = 0; i < n;) {
        char c = text[i];
        if (in_string) {
            *o++ = c;
            if (c == '\\' && i + 1 < n) *o++ = text[++i];
            else if (c == '"') in_string = false;
            i++;
        } else if (c == '"') {
            in_string = true;
            *o++ = text[i++];
        } else if (c >= '0' && c <= '9') {
            size_t j = i;
            while (j < n && text[j] >= '0' && text[j] <= '9') j++;
            bool big = j - i >= 16 && (i == 0 || text[i - 1] != '-');
            if (big) *o++ = '"';
            memcpy(o, text + i, j - i);
            o += j - i;
            if (big) *o++ = '"';
            i = j;
        } else {
            *o++ = text[i++];
        }
    }
    *o = '\0';
    return out;
}

static bool json_u64(const cJSON *json, uint64_t *value) {
    if (cJSON_IsString(json)) {
        char *end;
        *value = strtoull(json->valuestring, &end, 10);
        return *end == '\0';
    }
    if (!cJSON_IsNumber(json) || json->valuedouble < 0 || json->valuedouble > 9007199254740992.0)
        return false;
    *value = (uint64_t)json->valuedouble;
    return true;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    size_t got = fread(text, 1, (size_t)size, f);
    fclose(f);
    text[got] = '\0';
    return text;
}

/* Keeps decoded hex buffers alive until a vector is encoded. */
typedef struct arena {
    uint8_t *blocks[64];
    int count;
} arena;

static uint8_t *arena_hex(arena *a, const char *hex, size_t *len) {
    uint8_t *b = from_hex(hex, len);
    if (b && a->count < 64) a->blocks[a->count++] = b;
    return b;
}

static void arena_free(arena *a) {
    for (int i = 0; i < a->count; i++) free(a->blocks[i]);
    a->count = 0;
}

/* ------------------------------------------------------- frame vectors */

static void compare_field(const char *vector, const field_desc *fd, const cumulo_frame *frame,
                          const cJSON *json) {
    const uint8_t *at = (const uint8_t *)frame + fd->offset;
    bool ok = false;
    switch (fd->kind) {
    case K_U8: ok = cJSON_IsNumber(json) && *(const uint8_t *)at == json->valuedouble; break;
    case K_I8: ok = cJSON_IsNumber(json) && *(const int8_t *)at == json->valuedouble; break;
    case K_U16: ok = cJSON_IsNumber(json) && *(const uint16_t *)at == json->valuedouble; break;
    case K_U32: ok = cJSON_IsNumber(json) && *(const uint32_t *)at == json->valuedouble; break;
    case K_U64: {
        uint64_t want;
        ok = json_u64(json, &want) && *(const uint64_t *)at == want;
        break;
    }
    case K_TID:
        ok = cJSON_IsString(json) &&
             bytes_equal_hex(((const cumulo_trans_id *)at)->bytes, 16, json->valuestring);
        break;
    case K_STR: {
        const cumulo_str *s = (const cumulo_str *)at;
        ok = cJSON_IsString(json) && strlen(json->valuestring) == s->len &&
             memcmp(s->data, json->valuestring, s->len) == 0;
        break;
    }
    case K_BYTES: {
        const cumulo_bytes *b = (const cumulo_bytes *)at;
        ok = cJSON_IsString(json) && bytes_equal_hex(b->data, b->len, json->valuestring);
        break;
    }
    case K_TIDS: {
        ok = cJSON_IsArray(json) &&
             (uint32_t)cJSON_GetArraySize(json) == frame->u.mcast_sent.count;
        int i = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, json) {
            if (ok) ok = cJSON_IsString(id) && bytes_equal_hex(frame->u.mcast_sent.trans_ids + 16 * i,
                                                               16, id->valuestring);
            i++;
        }
        break;
    }
    }
    if (!ok) {
        fprintf(stderr, "vector %s: decoded field %s differs from the JSON\n", vector, fd->name);
        atomic_fetch_add(&check_failures, 1);
    }
}

static bool set_field(arena *a, const field_desc *fd, cumulo_frame *frame, const cJSON *json) {
    uint8_t *at = (uint8_t *)frame + fd->offset;
    size_t len;
    switch (fd->kind) {
    case K_U8: *(uint8_t *)at = (uint8_t)json->valuedouble; return cJSON_IsNumber(json);
    case K_I8: *(int8_t *)at = (int8_t)json->valuedouble; return cJSON_IsNumber(json);
    case K_U16: *(uint16_t *)at = (uint16_t)json->valuedouble; return cJSON_IsNumber(json);
    case K_U32: *(uint32_t *)at = (uint32_t)json->valuedouble; return cJSON_IsNumber(json);
    case K_U64: return json_u64(json, (uint64_t *)at);
    case K_TID: {
        uint8_t *b = cJSON_IsString(json) ? arena_hex(a, json->valuestring, &len) : NULL;
        if (!b || len != 16) return false;
        memcpy(((cumulo_trans_id *)at)->bytes, b, 16);
        return true;
    }
    case K_STR:
        if (!cJSON_IsString(json)) return false;
        *(cumulo_str *)at = (cumulo_str){json->valuestring, strlen(json->valuestring)};
        return true;
    case K_BYTES: {
        uint8_t *b = cJSON_IsString(json) ? arena_hex(a, json->valuestring, &len) : NULL;
        if (!b) return false;
        *(cumulo_bytes *)at = (cumulo_bytes){b, len};
        return true;
    }
    case K_TIDS: {
        if (!cJSON_IsArray(json)) return false;
        int n = cJSON_GetArraySize(json);
        uint8_t *ids = malloc((size_t)n * 16 + 1);
        a->blocks[a->count++] = ids;
        int i = 0;
        const cJSON *id;
        cJSON_ArrayForEach(id, json) {
            uint8_t *b = cJSON_IsString(id) ? from_hex(id->valuestring, &len) : NULL;
            if (!b || len != 16) {
                free(b);
                return false;
            }
            memcpy(ids + 16 * i++, b, 16);
            free(b);
        }
        frame->u.mcast_sent.count = (uint32_t)n;
        frame->u.mcast_sent.trans_ids = ids;
        return true;
    }
    }
    return false;
}

static void run_frame_vector(const cJSON *v) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(v, "name"));
    const char *type_name = cJSON_GetStringValue(cJSON_GetObjectItem(v, "type"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(v, "hex"));
    const cJSON *fields = cJSON_GetObjectItem(v, "fields");
    const type_desc *type = type_name ? find_type(type_name) : NULL;
    CHECK(name && hex && fields && type);
    if (!name || !hex || !fields || !type) return;

    size_t len;
    uint8_t *wire = from_hex(hex, &len);
    CHECK(wire != NULL);
    cumulo_frame frame;
    int rc = cumulo_frame_decode(wire, len, CUMULO_DEFAULT_MAX_FRAME, &frame);
    if (rc != CUMULO_OK) {
        fprintf(stderr, "vector %s: decode failed with %s\n", name, cumulo_status_name(rc));
        atomic_fetch_add(&check_failures, 1);
    } else {
        CHECK_EQ_INT(frame.type, type->code);
        for (const field_desc *fd = type->fields; fd->name; fd++) {
            const cJSON *json = cJSON_GetObjectItem(fields, fd->name);
            if (!json) {
                fprintf(stderr, "vector %s: JSON lacks field %s\n", name, fd->name);
                atomic_fetch_add(&check_failures, 1);
                continue;
            }
            compare_field(name, fd, &frame, json);
        }
    }

    /* the same frame with its body cut short (length field adjusted) is malformed */
    for (size_t cut = 5; cut < len; cut++) {
        uint8_t *part = malloc(cut);
        memcpy(part, wire, cut);
        uint32_t body = (uint32_t)(cut - 4);
        part[0] = (uint8_t)body, part[1] = (uint8_t)(body >> 8);
        part[2] = (uint8_t)(body >> 16), part[3] = (uint8_t)(body >> 24);
        cumulo_frame partial;
        int partial_rc = cumulo_frame_decode(part, cut, CUMULO_DEFAULT_MAX_FRAME, &partial);
        if (partial_rc != CUMULO_MALFORMED) {
            fprintf(stderr, "vector %s cut to %zu bytes: got %s\n", name, cut,
                    cumulo_status_name(partial_rc));
            atomic_fetch_add(&check_failures, 1);
        }
        free(part);
    }

    /* encode from the JSON fields alone */
    arena a = {0};
    cumulo_frame built;
    memset(&built, 0, sizeof built);
    built.type = type->code;
    bool ok = true;
    for (const field_desc *fd = type->fields; fd->name; fd++) {
        const cJSON *json = cJSON_GetObjectItem(fields, fd->name);
        if (!json || !set_field(&a, fd, &built, json)) ok = false;
    }
    CHECK(ok);
    size_t size = cumulo_frame_size(&built);
    CHECK_EQ_INT(size, len);
    uint8_t *out = malloc(size ? size : 1);
    size_t written = 0;
    CHECK_STATUS(cumulo_frame_encode(&built, out, size, &written), CUMULO_OK);
    if (written != len || memcmp(out, wire, len) != 0) {
        fprintf(stderr, "vector %s: encoding differs from hex\n", name);
        atomic_fetch_add(&check_failures, 1);
    }
    /* one byte short of room must be refused, not overrun */
    if (size) CHECK_STATUS(cumulo_frame_encode(&built, out, size - 1, &written), CUMULO_TOO_LARGE);
    free(out);
    arena_free(&a);
    free(wire);
}

static int expected_status(const char *error) {
    if (strcmp(error, "MALFORMED") == 0) return CUMULO_MALFORMED;
    if (strcmp(error, "TOO_LARGE") == 0) return CUMULO_TOO_LARGE;
    return -1000;
}

static void run_invalid_frame(const cJSON *v) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(v, "name"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(v, "hex"));
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItem(v, "error"));
    CHECK(name && hex && error);
    if (!name || !hex || !error) return;
    size_t len;
    uint8_t *wire = from_hex(hex, &len);
    cumulo_frame frame;
    int rc = cumulo_frame_decode(wire, len, INVALID_LIMIT, &frame);
    if (rc != expected_status(error)) {
        fprintf(stderr, "invalid vector %s: got %s, expected %s\n", name, cumulo_status_name(rc),
                error);
        atomic_fetch_add(&check_failures, 1);
    }
    free(wire);
}

/* ---------------------------------------------------------- kv vectors */

static void run_kv_vector(const cJSON *v) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(v, "name"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(v, "hex"));
    const cJSON *pairs = cJSON_GetObjectItem(v, "pairs");
    CHECK(name && hex && cJSON_IsArray(pairs));
    if (!name || !hex || !cJSON_IsArray(pairs)) return;
    size_t len;
    uint8_t *wire = from_hex(hex, &len);
    size_t n = (size_t)cJSON_GetArraySize(pairs);
    cumulo_kv parsed[16], want[16];
    size_t count = 0;
    CHECK(n <= 16);
    CHECK_STATUS(cumulo_kv_parse(wire, len, parsed, 16, &count), CUMULO_OK);
    CHECK_EQ_INT(count, n);
    size_t i = 0;
    const cJSON *pair;
    cJSON_ArrayForEach(pair, pairs) {
        const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(pair, 0));
        const char *val = cJSON_GetStringValue(cJSON_GetArrayItem(pair, 1));
        CHECK(k && val && i < 16);
        if (!k || !val || i >= 16) break;
        if (i < count) {
            CHECK_VIEW(parsed[i].key.data, parsed[i].key.len, k);
            CHECK_VIEW(parsed[i].value.data, parsed[i].value.len, val);
        }
        want[i].key = (cumulo_bytes){(const uint8_t *)k, strlen(k)};
        want[i].value = (cumulo_bytes){(const uint8_t *)val, strlen(val)};
        i++;
    }
    size_t needed = 0;
    uint8_t out[512];
    CHECK_STATUS(cumulo_kv_encode(want, i, out, sizeof out, &needed), CUMULO_OK);
    if (needed != len || (len && memcmp(out, wire, len) != 0)) {
        fprintf(stderr, "kv vector %s: encoding differs from hex\n", name);
        atomic_fetch_add(&check_failures, 1);
    }
    free(wire);
}

static void run_invalid_kv(const cJSON *v) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(v, "name"));
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(v, "hex"));
    CHECK(name && hex);
    if (!name || !hex) return;
    size_t len;
    uint8_t *wire = from_hex(hex, &len);
    cumulo_kv parsed[4];
    size_t count = 99;
    int rc = cumulo_kv_parse(wire, len, parsed, 4, &count);
    if (rc != CUMULO_MALFORMED) {
        fprintf(stderr, "invalid kv vector %s: got %s\n", name, cumulo_status_name(rc));
        atomic_fetch_add(&check_failures, 1);
    }
    free(wire);
}

/* ----------------------------------------------------------------- main */

static int run_file(const char *path, int *vectors, int *invalids) {
    char *raw = read_file(path);
    char *text = raw ? quote_big_integers(raw) : NULL;
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    free(raw);
    free(text);
    if (!doc) {
        fprintf(stderr, "%s: cannot read or parse\n", path);
        return 1;
    }
    const char *family = cJSON_GetStringValue(cJSON_GetObjectItem(doc, "family"));
    bool kv = family && strcmp(family, "kv") == 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(doc, "vectors")) {
        if (kv) run_kv_vector(v);
        else run_frame_vector(v);
        (*vectors)++;
    }
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(doc, "invalid")) {
        if (kv) run_invalid_kv(v);
        else run_invalid_frame(v);
        (*invalids)++;
    }
    cJSON_Delete(doc);
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : CUMULO_VECTORS_DIR;
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open vectors folder %s\n", dir);
        return 1;
    }
    int files = 0, vectors = 0, invalids = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (run_file(path, &vectors, &invalids)) atomic_fetch_add(&check_failures, 1);
        files++;
    }
    closedir(d);
    printf("%d files, %d vectors, %d invalid entries\n", files, vectors, invalids);
    CHECK(files > 0 && vectors > 0 && invalids > 0);
    return check_report("test_vectors");
}
