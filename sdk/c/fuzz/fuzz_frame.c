/* libFuzzer target for the frame decoder: any input either fails to decode
 * or decodes to a frame that re-encodes to exactly the same bytes. */
#include "cumulo.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t frame_len;
    (void)cumulo_frame_header(data, size, 1024, &frame_len);
    cumulo_frame frame;
    if (cumulo_frame_decode(data, size, CUMULO_DEFAULT_MAX_FRAME, &frame) != CUMULO_OK) return 0;
    size_t encoded = cumulo_frame_size(&frame);
    if (encoded != size) abort();
    uint8_t *out = malloc(encoded);
    size_t written;
    if (cumulo_frame_encode(&frame, out, encoded, &written) != CUMULO_OK || written != size ||
        memcmp(out, data, size) != 0)
        abort();
    free(out);
    return 0;
}
