/*
 * What the parts of cumulo._ccodec share: the frame layouts read from
 * cumulo.messages.LAYOUTS, the decoder and encoder of _ccodec.c, the serve
 * loop of serve.c and the key/value parser of kv.c.
 */
#ifndef CUMULO_CODEC_H
#define CUMULO_CODEC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define TID_SIZE 16
#define MAX_FIELDS 32
#define NO_LIMIT 0xFFFFFFFFull

/* Status codes of PROTOCOL.md 2.3 used here. */
#define STATUS_OK 0
#define STATUS_MALFORMED 5
#define STATUS_TOO_LARGE 8

/* Frame type codes this module needs by name. */
#define TYPE_SEND_ASYNC 0x10
#define TYPE_SEND_SYNC 0x11
#define TYPE_MCAST_ASYNC 0x12
#define TYPE_RETURN 0x20
#define TYPE_FORWARD 0x21
#define TYPE_PING 0x30
#define TYPE_PONG 0x31
#define TYPE_REQUEST 0x82

/* Field positions in cumulo.messages.Request (wire order). */
#define REQUEST_TRANS_ID 0
#define REQUEST_PATTERN 6
#define REQUEST_INFO 7

typedef struct {
    PyTypeObject *cls; /* NULL: unknown type code */
    char layout[MAX_FIELDS + 1];
    Py_ssize_t n_fields;
} FrameSpec;

extern FrameSpec specs[256];
extern PyObject *DecodeError; /* cumulo.errors.DecodeError */

/* Raise DecodeError(message, status); returns NULL. */
PyObject *decode_error(int status, const char *format, ...);
/* (list of messages, end of the last complete frame) for buf[start:end]. */
PyObject *decode_range(const unsigned char *buf, Py_ssize_t start, Py_ssize_t end, uint64_t limit);
/* One frame of type `code` from its field values, as bytes. */
PyObject *encode_fields(int code, PyObject *const *values, Py_ssize_t n_values);

/* serve.c */
int serve_init(void);
PyObject *serve(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* kv.c */
PyObject *info_parse(PyObject *module, PyObject *data);

#endif
