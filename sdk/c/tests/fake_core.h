/* A scripted stand-in for the cumulo core, speaking real frames over a real
 * socket, for the session tests. */
#ifndef CUMULO_TEST_FAKE_CORE_H
#define CUMULO_TEST_FAKE_CORE_H

#include "cumulo.h"

typedef struct fake_core {
    int fd;
    uint8_t *buf; /* frames as read; a decoded frame's views point in here */
    size_t len, cap;
} fake_core;

void fc_init(fake_core *fc, int fd);
void fc_close(fake_core *fc);

/* Reads one frame (blocking, up to 10 s). Returns CUMULO_OK, CUMULO_E_CLOSED
 * on EOF, or an error. */
int fc_read(fake_core *fc, cumulo_frame *frame);
/* Reads one frame and checks its type; false (with a failed check) otherwise. */
bool fc_expect(fake_core *fc, uint8_t type, cumulo_frame *frame);
/* True if the peer closed the connection (EOF) within 10 s. */
bool fc_eof(fake_core *fc);

void fc_send(fake_core *fc, const cumulo_frame *frame);
void fc_send_raw(fake_core *fc, const void *data, size_t len);

/* Sends a WELCOME with the given prefix and max_frame and fixed other values
 * (node 3, instance 9, timeouts 4000/6000/2500, priority 2). */
void fc_welcome(fake_core *fc, const char *prefix, uint32_t max_frame);
/* Reads HELLO, then fc_welcome. */
void fc_handshake(fake_core *fc, const char *prefix, uint32_t max_frame);

void fc_send_reply(fake_core *fc, uint32_t req_id, uint16_t status, uint32_t value,
                   const char *message);
/* REQUEST with flags SYNC, source node 3 instance 1, 3000 ms left. */
void fc_send_request(fake_core *fc, const cumulo_trans_id *tid, const char *name,
                     const char *pattern, const void *info, size_t info_len, const void *body,
                     size_t body_len);
void fc_send_response(fake_core *fc, const cumulo_trans_id *tid, uint16_t status,
                      const void *info, size_t info_len, const void *body, size_t body_len);
void fc_send_simple(fake_core *fc, uint8_t type); /* TERMINATE(1000) or PING(nonce 77) */

/* A trans_id made up by the core for its own requests. */
cumulo_trans_id fc_tid(uint8_t seed);

#endif
