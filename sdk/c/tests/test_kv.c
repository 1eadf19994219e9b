/* Key/value helpers: encode, parse, find, and malformed input. Buffers are
 * heap copies of exactly their length so the sanitizer build catches any
 * read past the end. */
#include "check.h"
#include "cumulo.h"

#include <stdlib.h>

CHECK_DEFINE_COUNTER;

static uint8_t *exact_copy(const void *data, size_t len) {
    uint8_t *copy = malloc(len ? len : 1);
    if (len) memcpy(copy, data, len);
    return copy;
}

static cumulo_kv pair(const char *key, const char *value) {
    cumulo_kv kv = {{(const uint8_t *)key, strlen(key)}, {(const uint8_t *)value, strlen(value)}};
    return kv;
}

static void test_round_trip(void) {
    cumulo_kv pairs[] = {pair("status", "200"), pair("a", ""), pair("a", "2"), pair("", "x")};
    size_t needed = 0;
    CHECK_STATUS(cumulo_kv_encode(pairs, 4, NULL, 0, &needed), CUMULO_TOO_LARGE);
    CHECK_EQ_INT(needed, (7 + 4) + (2 + 1) + (2 + 2) + (1 + 2));
    uint8_t out[64];
    CHECK_STATUS(cumulo_kv_encode(pairs, 4, out, sizeof out, &needed), CUMULO_OK);
    CHECK(memcmp(out, "status\000200\0a\0\0a\0002\0\0x\0", needed) == 0);

    uint8_t *buf = exact_copy(out, needed);
    cumulo_kv parsed[4];
    size_t count = 0;
    CHECK_STATUS(cumulo_kv_parse(buf, needed, parsed, 4, &count), CUMULO_OK);
    CHECK_EQ_INT(count, 4);
    for (size_t i = 0; i < 4 && i < count; i++) {
        CHECK(parsed[i].key.len == pairs[i].key.len &&
              memcmp(parsed[i].key.data, pairs[i].key.data, pairs[i].key.len) == 0);
        CHECK(parsed[i].value.len == pairs[i].value.len &&
              memcmp(parsed[i].value.data, pairs[i].value.data, pairs[i].value.len) == 0);
    }
    /* fewer slots than pairs: the first ones are stored, the total is told */
    CHECK_STATUS(cumulo_kv_parse(buf, needed, parsed, 1, &count), CUMULO_OK);
    CHECK_EQ_INT(count, 4);
    CHECK_VIEW(parsed[0].key.data, parsed[0].key.len, "status");

    /* find: first occurrence of a repeated key; absent key */
    cumulo_bytes value;
    bool found = false;
    CHECK_STATUS(cumulo_kv_find(buf, needed, "a", 1, &value, &found), CUMULO_OK);
    CHECK(found && value.len == 0);
    CHECK_STATUS(cumulo_kv_find(buf, needed, "stat", 4, &value, &found), CUMULO_OK);
    CHECK(!found);
    CHECK_STATUS(cumulo_kv_find(buf, needed, "", 0, &value, &found), CUMULO_OK);
    CHECK(found);
    CHECK_VIEW(value.data, value.len, "x");
    free(buf);
}

static void test_empty(void) {
    size_t count = 7, needed = 7;
    CHECK_STATUS(cumulo_kv_validate(NULL, 0, &count), CUMULO_OK);
    CHECK_EQ_INT(count, 0);
    CHECK_STATUS(cumulo_kv_encode(NULL, 0, NULL, 0, &needed), CUMULO_OK);
    CHECK_EQ_INT(needed, 0);
    size_t offset = 0;
    cumulo_kv kv;
    CHECK(!cumulo_kv_next(NULL, 0, &offset, &kv));
}

/* Every strict prefix of a valid buffer that does not end on a pair
 * boundary is malformed, and checking it stays inside the prefix. */
static void test_truncations(void) {
    static const char full[] = "content-type\0text/xml\0value\00042\0";
    size_t len = sizeof full - 1;
    size_t boundaries[] = {0, 22, len};
    for (size_t cut = 0; cut <= len; cut++) {
        uint8_t *buf = exact_copy(full, cut);
        bool boundary = false;
        for (size_t b = 0; b < 3; b++) boundary |= cut == boundaries[b];
        size_t count;
        int rc = cumulo_kv_validate(buf, cut, &count);
        if (boundary) CHECK_STATUS(rc, CUMULO_OK);
        else CHECK_STATUS(rc, CUMULO_MALFORMED);
        cumulo_bytes value;
        bool found;
        CHECK_STATUS(cumulo_kv_find(buf, cut, "value", 5, &value, &found),
                     boundary ? CUMULO_OK : CUMULO_MALFORMED);
        free(buf);
    }
}

static void test_malformed(void) {
    const struct {
        const char *data;
        size_t len;
    } bad[] = {{"a", 1}, {"a\0", 2}, {"a\0b", 3}, {"a\0b\0c\0", 6}, {"\0", 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t *buf = exact_copy(bad[i].data, bad[i].len);
        cumulo_kv parsed[2];
        size_t count = 9;
        CHECK_STATUS(cumulo_kv_parse(buf, bad[i].len, parsed, 2, &count), CUMULO_MALFORMED);
        CHECK_EQ_INT(count, 0);
        free(buf);
    }
}

static void test_encode_refuses_nul(void) {
    cumulo_kv with_nul = {{(const uint8_t *)"a\0b", 3}, {(const uint8_t *)"v", 1}};
    uint8_t out[16];
    size_t needed;
    CHECK_STATUS(cumulo_kv_encode(&with_nul, 1, out, sizeof out, &needed),
                 CUMULO_INVALID_ARGUMENT);
    cumulo_kv value_nul = {{(const uint8_t *)"k", 1}, {(const uint8_t *)"\0", 1}};
    CHECK_STATUS(cumulo_kv_encode(&value_nul, 1, out, sizeof out, &needed),
                 CUMULO_INVALID_ARGUMENT);
    /* too little room: refused without writing past cap */
    cumulo_kv ok = pair("key", "value");
    CHECK_STATUS(cumulo_kv_encode(&ok, 1, out, 9, &needed), CUMULO_TOO_LARGE);
    CHECK_EQ_INT(needed, 10);
}

static void test_iterate(void) {
    static const char data[] = "a\0001\0b\0002\0";
    uint8_t *buf = exact_copy(data, sizeof data - 1);
    size_t offset = 0, n = 0;
    cumulo_kv kv;
    while (cumulo_kv_next(buf, sizeof data - 1, &offset, &kv)) {
        CHECK_EQ_INT(kv.key.len, 1);
        CHECK_EQ_INT(kv.value.len, 1);
        CHECK_EQ_INT(kv.value.data[0], '1' + (int)n);
        n++;
    }
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(offset, sizeof data - 1);
    free(buf);
}

int main(void) {
    test_round_trip();
    test_empty();
    test_truncations();
    test_malformed();
    test_encode_refuses_nul();
    test_iterate();
    return check_report("test_kv");
}
