/* libFuzzer target for the key/value parser: it never reads past the input,
 * and a buffer it accepts re-encodes to exactly the same bytes. */
#include "cumulo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PAIRS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cumulo_kv pairs[MAX_PAIRS];
    size_t count = 0;
    cumulo_bytes value;
    bool found;
    (void)cumulo_kv_find(data, size, "value", 5, &value, &found);
    if (cumulo_kv_parse(data, size, pairs, MAX_PAIRS, &count) != CUMULO_OK) return 0;
    if (count > MAX_PAIRS) return 0;
    size_t needed;
    uint8_t *out = malloc(size ? size : 1);
    if (cumulo_kv_encode(pairs, count, out, size, &needed) != CUMULO_OK || needed != size ||
        (size && memcmp(out, data, size) != 0))
        abort();
    free(out);
    return 0;
}
