/*
 * info_parse(data): cumulo.info.info_parse in C (PROTOCOL.md section 5).
 *
 * Handlers parse request bodies and request_info with it on every request,
 * so the accelerated mode has it too; same results, same errors.
 */
#include "codec.h"

PyObject *info_parse(PyObject *module, PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *buf = (const char *)view.buf;
    Py_ssize_t size = view.len;
    PyObject *pairs = NULL;
    if (size > 0 && buf[size - 1] != '\0') {
        decode_error(STATUS_MALFORMED, "key/value buffer does not end with NUL");
        goto done;
    }
    /* Every field ends with NUL: as many fields as NULs, and they come in pairs. */
    Py_ssize_t fields = 0;
    for (const char *p = buf; (p = memchr(p, '\0', (size_t)(buf + size - p))) != NULL; p++)
        fields++;
    if (fields % 2) {
        decode_error(STATUS_MALFORMED, "key/value buffer has a key without a value");
        goto done;
    }
    if ((pairs = PyList_New(fields / 2)) == NULL)
        goto done;
    const char *p = buf;
    for (Py_ssize_t i = 0; i < fields / 2; i++) {
        const char *key_end = memchr(p, '\0', (size_t)(buf + size - p));
        const char *value = key_end + 1;
        const char *value_end = memchr(value, '\0', (size_t)(buf + size - value));
        PyObject *pair = Py_BuildValue("(y#y#)", p, (Py_ssize_t)(key_end - p), value,
                                       (Py_ssize_t)(value_end - value));
        if (pair == NULL) {
            Py_CLEAR(pairs);
            goto done;
        }
        PyList_SET_ITEM(pairs, i, pair);
        p = value_end + 1;
    }
done:
    PyBuffer_Release(&view);
    return pairs;
}
