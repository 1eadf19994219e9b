/* Codec details beyond the shared vectors: length prefix handling, UTF-8
 * checks, refusing what cannot be encoded, status names. */
#include "check.h"
#include "cumulo.h"

#include <stdlib.h>

CHECK_DEFINE_COUNTER;

static void test_header(void) {
    const uint8_t zero[4] = {0, 0, 0, 0}, big[4] = {0x01, 0x04, 0, 0}, ok[4] = {9, 0, 0, 0};
    size_t frame_len = 0;
    CHECK_STATUS(cumulo_frame_header(ok, 3, 1024, &frame_len), CUMULO_E_INCOMPLETE);
    CHECK_STATUS(cumulo_frame_header(zero, 4, 1024, &frame_len), CUMULO_MALFORMED);
    CHECK_STATUS(cumulo_frame_header(big, 4, 1024, &frame_len), CUMULO_TOO_LARGE);
    CHECK_STATUS(cumulo_frame_header(big, 4, 1025, &frame_len), CUMULO_OK);
    CHECK_EQ_INT(frame_len, 1029);
    CHECK_STATUS(cumulo_frame_header(ok, 4, 1024, &frame_len), CUMULO_OK);
    CHECK_EQ_INT(frame_len, 13);
    /* a whole PING with one byte too many is malformed */
    const uint8_t ping_trailing[] = {10, 0, 0, 0, 0x30, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    cumulo_frame f;
    CHECK_STATUS(cumulo_frame_decode(ping_trailing, sizeof ping_trailing, 1024, &f), CUMULO_MALFORMED);
    /* a frame buffer longer than its length prefix says is malformed too */
    const uint8_t goodbye_plus[] = {1, 0, 0, 0, 0x32, 0};
    CHECK_STATUS(cumulo_frame_decode(goodbye_plus, sizeof goodbye_plus, 1024, &f), CUMULO_MALFORMED);
    CHECK_STATUS(cumulo_frame_decode(goodbye_plus, 5, 1024, &f), CUMULO_OK);
    CHECK_EQ_INT(f.type, CUMULO_FRAME_GOODBYE);
}

static void test_utf8(void) {
    CHECK(cumulo_utf8_valid((const uint8_t *)"", 0));
    CHECK(cumulo_utf8_valid((const uint8_t *)"caf\xc3\xa9 \xe9\x9b\xb2 \xf0\x9f\x98\x80", 14));
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\xc3", 1));               /* truncated */
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\xc0\xaf", 2));           /* overlong */
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\xed\xa0\x80", 3));       /* surrogate */
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\xf4\x90\x80\x80", 4));   /* over U+10FFFF */
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\xff", 1));
    CHECK(!cumulo_utf8_valid((const uint8_t *)"\x80", 1));
}

static void test_encode_refusals(void) {
    cumulo_frame f = {.type = CUMULO_FRAME_SUBSCRIBE};
    f.u.control.pattern = (cumulo_str){"\xc3\x28", 2};
    CHECK_EQ_INT(cumulo_frame_size(&f), 0);
    uint8_t out[64];
    size_t written = 99;
    CHECK_STATUS(cumulo_frame_encode(&f, out, sizeof out, &written), CUMULO_INVALID_ARGUMENT);
    CHECK_EQ_INT(written, 0);

    char *long_str = malloc(70000);
    memset(long_str, 'a', 70000);
    f.u.control.pattern = (cumulo_str){long_str, 70000};
    CHECK_EQ_INT(cumulo_frame_size(&f), 0);
    f.u.control.pattern = (cumulo_str){long_str, 65535};
    CHECK_EQ_INT(cumulo_frame_size(&f), 4 + 1 + 4 + 2 + 65535);
    free(long_str);

    cumulo_frame unknown = {.type = 0x7e};
    CHECK_EQ_INT(cumulo_frame_size(&unknown), 0);
}

static void test_status_names(void) {
    CHECK(strcmp(cumulo_status_name(CUMULO_OK), "OK") == 0);
    CHECK(strcmp(cumulo_status_name(CUMULO_SERVICE_ERROR), "SERVICE_ERROR") == 0);
    CHECK(strcmp(cumulo_status_name(CUMULO_PROTOCOL), "PROTOCOL") == 0);
    CHECK(strcmp(cumulo_status_name(CUMULO_UNAVAILABLE), "UNAVAILABLE") == 0);
    CHECK_EQ_INT(CUMULO_UNAVAILABLE, 13);
    CHECK(strcmp(cumulo_status_name(4242), "UNKNOWN") == 0);
    CHECK(strcmp(cumulo_status_name(CUMULO_E_CLOSED), "E_CLOSED") == 0);
    for (int s = -7; s <= 13; s++) CHECK(strlen(cumulo_strerror(s)) > 0);
}

static void test_trans_id_hex(void) {
    cumulo_trans_id id;
    for (int i = 0; i < 16; i++) id.bytes[i] = (uint8_t)(i * 17);
    char hex[33];
    cumulo_trans_id_hex(&id, hex);
    CHECK(strcmp(hex, "00112233445566778899aabbccddeeff") == 0);
}

int main(void) {
    test_header();
    test_utf8();
    test_encode_refusals();
    test_status_names();
    test_trans_id_hex();
    return check_report("test_codec");
}
