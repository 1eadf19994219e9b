/* Key/value metadata encoding (PROTOCOL.md section 5): key\0value\0...
 * Parsers take a pointer and a length and never look past it. */
#include "cumulo.h"

#include <string.h>

/* Reads one NUL-terminated field starting at *offset; false if no NUL follows
 * inside the buffer. */
static bool next_field(const uint8_t *buf, size_t len, size_t *offset, cumulo_bytes *field) {
    if (*offset >= len) return false;
    const uint8_t *start = buf + *offset;
    const uint8_t *nul = memchr(start, 0, len - *offset);
    if (!nul) return false;
    field->data = start;
    field->len = (size_t)(nul - start);
    *offset += field->len + 1;
    return true;
}

bool cumulo_kv_next(const uint8_t *buf, size_t len, size_t *offset, cumulo_kv *pair) {
    size_t at = *offset;
    cumulo_kv kv;
    if (!buf || !next_field(buf, len, &at, &kv.key) || !next_field(buf, len, &at, &kv.value))
        return false;
    *offset = at;
    *pair = kv;
    return true;
}

int cumulo_kv_validate(const uint8_t *buf, size_t len, size_t *count) {
    size_t offset = 0, n = 0;
    cumulo_kv kv;
    if (len && !buf) return CUMULO_INVALID_ARGUMENT;
    while (cumulo_kv_next(buf, len, &offset, &kv)) n++;
    if (count) *count = n;
    return offset == len ? CUMULO_OK : CUMULO_MALFORMED;
}

int cumulo_kv_parse(const uint8_t *buf, size_t len, cumulo_kv *pairs, size_t max_pairs,
                    size_t *count) {
    size_t total = 0;
    int rc = cumulo_kv_validate(buf, len, &total);
    if (count) *count = rc == CUMULO_OK ? total : 0;
    if (rc != CUMULO_OK) return rc;
    size_t offset = 0, i = 0;
    cumulo_kv kv;
    while (i < max_pairs && cumulo_kv_next(buf, len, &offset, &kv)) pairs[i++] = kv;
    return CUMULO_OK;
}

int cumulo_kv_find(const uint8_t *buf, size_t len, const char *key, size_t key_len,
                   cumulo_bytes *value, bool *found) {
    *found = false;
    int rc = cumulo_kv_validate(buf, len, NULL);
    if (rc != CUMULO_OK) return rc;
    size_t offset = 0;
    cumulo_kv kv;
    while (cumulo_kv_next(buf, len, &offset, &kv)) {
        if (kv.key.len == key_len && (key_len == 0 || memcmp(kv.key.data, key, key_len) == 0)) {
            *value = kv.value;
            *found = true;
            break;
        }
    }
    return CUMULO_OK;
}

static bool has_nul(cumulo_bytes b) { return b.len && memchr(b.data, 0, b.len) != NULL; }

int cumulo_kv_encode(const cumulo_kv *pairs, size_t count, uint8_t *out, size_t cap,
                     size_t *needed) {
    size_t size = 0;
    *needed = 0;
    for (size_t i = 0; i < count; i++) {
        const cumulo_kv *kv = &pairs[i];
        if ((kv->key.len && !kv->key.data) || (kv->value.len && !kv->value.data) ||
            has_nul(kv->key) || has_nul(kv->value))
            return CUMULO_INVALID_ARGUMENT;
        size_t add = kv->key.len + kv->value.len + 2;
        if (add < 2 || size + add < size) return CUMULO_TOO_LARGE; /* size_t overflow */
        size += add;
    }
    *needed = size;
    if (size > cap) return CUMULO_TOO_LARGE;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (pairs[i].key.len) memcpy(out + at, pairs[i].key.data, pairs[i].key.len);
        at += pairs[i].key.len;
        out[at++] = 0;
        if (pairs[i].value.len) memcpy(out + at, pairs[i].value.data, pairs[i].value.len);
        at += pairs[i].value.len;
        out[at++] = 0;
    }
    return CUMULO_OK;
}
