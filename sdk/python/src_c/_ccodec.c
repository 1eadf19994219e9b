/*
 * cumulo._ccodec: the frame codec of cumulo.codec in C.
 *
 * Same functions and behaviour as cumulo/_pycodec.py. The wire layouts are
 * not repeated here: they are read at import from cumulo.messages.LAYOUTS
 * (one letter per field, see that module), so both implementations follow
 * one description. Decoding reads the caller's buffer in place and copies
 * only the fields it hands out; encoding sizes the frame first and writes it
 * into one bytes object.
 */
#include "codec.h"

FrameSpec specs[256];
static PyObject *code_of_class; /* dict: frame class -> type code */
PyObject *DecodeError;          /* cumulo.errors.DecodeError */

/* ---- little-endian access ---------------------------------------------- */

static inline uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static inline unsigned char *wr16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    return p + 2;
}

static inline unsigned char *wr32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
    return p + 4;
}

static inline unsigned char *wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    return wr32(p + 4, (uint32_t)(v >> 32));
}

/* ---- errors ------------------------------------------------------------- */

PyObject *decode_error(int status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    PyObject *message = PyUnicode_FromFormatV(format, args);
    va_end(args);
    if (message == NULL)
        return NULL;
    PyObject *exc = PyObject_CallFunction(DecodeError, "Oi", message, status);
    Py_DECREF(message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ---- decoding ----------------------------------------------------------- */

/* True if `need` more bytes are not available between pos and end. */
#define SHORT(need) ((uint64_t)(end - pos) < (uint64_t)(need))

static PyObject *decode_str(const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return decode_error(STATUS_MALFORMED, "invalid UTF-8 in a str field");
    }
    return s;
}

/* Decode the body buf[pos:end] of a frame of type `code` into its message. */
static PyObject *decode_body(int code, const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end)
{
    const FrameSpec *spec = &specs[code];
    if (spec->cls == NULL)
        return decode_error(STATUS_MALFORMED, "unknown frame type 0x%02x", code);
    /* A tuple subclass with no __dict__: allocate it at its size and fill it. */
    PyObject *message = spec->cls->tp_alloc(spec->cls, spec->n_fields);
    if (message == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < spec->n_fields; i++) {
        PyObject *value = NULL;
        uint64_t n;
        switch (spec->layout[i]) {
        case 'B':
            if (SHORT(1))
                goto truncated;
            value = PyLong_FromLong(buf[pos]);
            pos += 1;
            break;
        case 'b':
            if (SHORT(1))
                goto truncated;
            value = PyLong_FromLong((signed char)buf[pos]);
            pos += 1;
            break;
        case 'H':
            if (SHORT(2))
                goto truncated;
            value = PyLong_FromLong(rd16(buf + pos));
            pos += 2;
            break;
        case 'I':
            if (SHORT(4))
                goto truncated;
            value = PyLong_FromUnsignedLong(rd32(buf + pos));
            pos += 4;
            break;
        case 'Q':
            if (SHORT(8))
                goto truncated;
            value = PyLong_FromUnsignedLongLong(rd64(buf + pos));
            pos += 8;
            break;
        case 't':
            if (SHORT(TID_SIZE))
                goto truncated;
            value = PyBytes_FromStringAndSize((const char *)buf + pos, TID_SIZE);
            pos += TID_SIZE;
            break;
        case 's':
            if (SHORT(2))
                goto truncated;
            n = rd16(buf + pos);
            pos += 2;
            if (SHORT(n))
                goto truncated;
            value = decode_str(buf + pos, (Py_ssize_t)n);
            pos += (Py_ssize_t)n;
            break;
        case 'y':
            if (SHORT(4))
                goto truncated;
            n = rd32(buf + pos);
            pos += 4;
            if (SHORT(n))
                goto truncated;
            value = PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)n);
            pos += (Py_ssize_t)n;
            break;
        case 'T':
            if (SHORT(4))
                goto truncated;
            n = rd32(buf + pos);
            pos += 4;
            if (SHORT(n * TID_SIZE))
                goto truncated;
            value = PyTuple_New((Py_ssize_t)n);
            for (uint64_t k = 0; value != NULL && k < n; k++) {
                PyObject *tid = PyBytes_FromStringAndSize((const char *)buf + pos, TID_SIZE);
                if (tid == NULL)
                    Py_CLEAR(value);
                else
                    PyTuple_SET_ITEM(value, (Py_ssize_t)k, tid);
                pos += TID_SIZE;
            }
            break;
        default:
            PyErr_Format(PyExc_SystemError, "bad layout letter '%c'", spec->layout[i]);
        }
        if (value == NULL)
            goto fail;
        PyTuple_SET_ITEM(message, i, value);
    }
    if (pos != end) {
        decode_error(STATUS_MALFORMED, "%zd trailing bytes after the frame's fields", end - pos);
        goto fail;
    }
    return message;

truncated:
    decode_error(STATUS_MALFORMED, "frame body ends inside a field");
fail:
    Py_DECREF(message);
    return NULL;
}

static int as_limit(PyObject *obj, uint64_t *limit)
{
    if (obj == Py_None) {
        *limit = NO_LIMIT;
        return 0;
    }
    *limit = PyLong_AsUnsignedLongLong(obj);
    return (*limit == (uint64_t)-1 && PyErr_Occurred()) ? -1 : 0;
}

/* Decode the complete frames of buf[start:end]; partial one left in place. */
PyObject *decode_range(const unsigned char *buf, Py_ssize_t start, Py_ssize_t end, uint64_t limit)
{
    PyObject *frames = PyList_New(0);
    if (frames == NULL)
        return NULL;
    Py_ssize_t pos = start;
    while (end - pos >= 4) {
        uint32_t length = rd32(buf + pos);
        if (length > limit) {
            decode_error(STATUS_TOO_LARGE, "frame of %lu bytes is over the limit of %llu",
                         (unsigned long)length, (unsigned long long)limit);
            goto fail;
        }
        if (length == 0) {
            decode_error(STATUS_MALFORMED, "frame length 0 (the type byte is missing)");
            goto fail;
        }
        if ((uint64_t)(end - pos - 4) < length)
            break;
        PyObject *message = decode_body(buf[pos + 4], buf, pos + 5, pos + 4 + (Py_ssize_t)length);
        if (message == NULL)
            goto fail;
        int appended = PyList_Append(frames, message);
        Py_DECREF(message);
        if (appended < 0)
            goto fail;
        pos += 4 + (Py_ssize_t)length;
    }
    PyObject *result = Py_BuildValue("(Nn)", frames, pos);
    return result;
fail:
    Py_DECREF(frames);
    return NULL;
}

static PyObject *decode_frames(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *limit_obj;
    uint64_t limit;
    if (!PyArg_ParseTuple(args, "y*nnO:decode_frames", &view, &start, &end, &limit_obj))
        return NULL;
    PyObject *result = NULL;
    if (as_limit(limit_obj, &limit) < 0)
        goto done;
    if (start < 0 || start > end || end > view.len) {
        PyErr_SetString(PyExc_ValueError, "start/end outside the buffer");
        goto done;
    }
    result = decode_range((const unsigned char *)view.buf, start, end, limit);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *decode_frame(PyObject *module, PyObject *args)
{
    Py_buffer view;
    PyObject *limit_obj = Py_None;
    uint64_t limit;
    if (!PyArg_ParseTuple(args, "y*|O:decode_frame", &view, &limit_obj))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    if (as_limit(limit_obj, &limit) < 0)
        goto done;
    if (size >= 4) {
        uint32_t length = rd32(buf);
        if (length > limit) {
            decode_error(STATUS_TOO_LARGE, "frame of %lu bytes is over the limit of %llu",
                         (unsigned long)length, (unsigned long long)limit);
            goto done;
        }
        if (length == 0) {
            decode_error(STATUS_MALFORMED, "frame length 0 (the type byte is missing)");
            goto done;
        }
        if ((uint64_t)size - 4 < length)
            decode_error(STATUS_MALFORMED, "incomplete frame (%zd bytes)", size);
        else if ((uint64_t)size - 4 > length)
            decode_error(STATUS_MALFORMED, "%zd bytes after the frame", size - 4 - (Py_ssize_t)length);
        else
            result = decode_body(buf[4], buf, 5, size);
    } else {
        decode_error(STATUS_MALFORMED, "incomplete frame (%zd bytes)", size);
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* ---- encoding ----------------------------------------------------------- */

/* Convert an int-like object to a value in [lo, hi]; ValueError otherwise. */
static int as_int_in(PyObject *obj, long long lo, unsigned long long hi, unsigned long long *out)
{
    PyObject *index = PyNumber_Index(obj);
    if (index == NULL)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(index);
        return -1;
    }
    if (overflow > 0) {
        /* Above LLONG_MAX: only u64 reaches there. */
        unsigned long long u = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            goto out_of_range;
        }
        if (u > hi)
            goto out_of_range;
        *out = u;
        return 0;
    }
    Py_DECREF(index);
    if (overflow < 0 || v < lo || (v > 0 && (unsigned long long)v > hi))
        goto out_of_range;
    *out = (unsigned long long)v;
    return 0;
out_of_range:
    PyErr_Format(PyExc_ValueError, "field out of range for its wire type: %R not in %lld..%llu", obj, lo, hi);
    return -1;
}

typedef struct {
    uint64_t number;     /* fixed-width integers */
    const char *data;    /* t, s, y: the bytes to write */
    Py_ssize_t size;
    Py_buffer view;      /* t, y: held until written */
    int has_view;
    PyObject *sequence;  /* T: the trans_ids, as a fast sequence */
} Field;

static void release_fields(Field *fields, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (fields[i].has_view)
            PyBuffer_Release(&fields[i].view);
        Py_XDECREF(fields[i].sequence);
    }
}

static int get_tid(PyObject *obj, Py_buffer *view)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len != TID_SIZE) {
        PyErr_Format(PyExc_ValueError, "a trans_id is 16 bytes, got %zd", view->len);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Encode a frame of type `code` from its field values, in layout order. */
PyObject *encode_fields(int code, PyObject *const *values, Py_ssize_t n_values)
{
    const FrameSpec *spec = &specs[code];
    if (spec->cls == NULL) {
        PyErr_Format(PyExc_ValueError, "unknown frame type 0x%02x", code);
        return NULL;
    }
    if (n_values != spec->n_fields) {
        PyErr_Format(PyExc_ValueError, "frame type 0x%02x has %zd fields, got %zd", code, spec->n_fields, n_values);
        return NULL;
    }
    Field fields[MAX_FIELDS];
    memset(fields, 0, sizeof(fields));
    uint64_t size = 1; /* the type byte */
    Py_ssize_t i;
    PyObject *frame = NULL;

    for (i = 0; i < n_values; i++) {
        Field *f = &fields[i];
        PyObject *v = values[i];
        switch (spec->layout[i]) {
        case 'B':
            if (as_int_in(v, 0, 0xFF, (unsigned long long *)&f->number) < 0)
                goto fail;
            size += 1;
            break;
        case 'b':
            if (as_int_in(v, -128, 127, (unsigned long long *)&f->number) < 0)
                goto fail;
            size += 1;
            break;
        case 'H':
            if (as_int_in(v, 0, 0xFFFF, (unsigned long long *)&f->number) < 0)
                goto fail;
            size += 2;
            break;
        case 'I':
            if (as_int_in(v, 0, 0xFFFFFFFFull, (unsigned long long *)&f->number) < 0)
                goto fail;
            size += 4;
            break;
        case 'Q':
            if (as_int_in(v, 0, 0xFFFFFFFFFFFFFFFFull, (unsigned long long *)&f->number) < 0)
                goto fail;
            size += 8;
            break;
        case 't':
            if (get_tid(v, &f->view) < 0)
                goto fail;
            f->has_view = 1;
            f->data = f->view.buf;
            f->size = TID_SIZE;
            size += TID_SIZE;
            break;
        case 's':
            if (!PyUnicode_Check(v)) {
                PyErr_Format(PyExc_TypeError, "a str field needs str, got %.100s", Py_TYPE(v)->tp_name);
                goto fail;
            }
            f->data = PyUnicode_AsUTF8AndSize(v, &f->size);
            if (f->data == NULL)
                goto fail;
            if (f->size > 0xFFFF) {
                PyErr_Format(PyExc_ValueError, "str field of %zd bytes is over 65535", f->size);
                goto fail;
            }
            size += 2 + (uint64_t)f->size;
            break;
        case 'y':
            if (PyObject_GetBuffer(v, &f->view, PyBUF_SIMPLE) < 0)
                goto fail;
            f->has_view = 1;
            f->data = f->view.buf;
            f->size = f->view.len;
            if ((uint64_t)f->size > 0xFFFFFFFFull) {
                PyErr_Format(PyExc_ValueError, "bytes field of %zd bytes is over 4 GiB", f->size);
                goto fail;
            }
            size += 4 + (uint64_t)f->size;
            break;
        case 'T':
            f->sequence = PySequence_Fast(v, "trans_ids must be a sequence of 16-byte trans_ids");
            if (f->sequence == NULL)
                goto fail;
            f->size = PySequence_Fast_GET_SIZE(f->sequence);
            for (Py_ssize_t k = 0; k < f->size; k++) {
                Py_buffer tid;
                if (get_tid(PySequence_Fast_GET_ITEM(f->sequence, k), &tid) < 0)
                    goto fail;
                PyBuffer_Release(&tid);
            }
            size += 4 + (uint64_t)f->size * TID_SIZE;
            break;
        default:
            PyErr_Format(PyExc_SystemError, "bad layout letter '%c'", spec->layout[i]);
            goto fail;
        }
    }
    if (size > 0xFFFFFFFFull) {
        PyErr_Format(PyExc_ValueError, "frame of %llu bytes cannot be encoded", (unsigned long long)size);
        goto fail;
    }

    frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + size));
    if (frame == NULL)
        goto fail;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
    p = wr32(p, (uint32_t)size);
    *p++ = (unsigned char)code;
    for (i = 0; i < n_values; i++) {
        Field *f = &fields[i];
        switch (spec->layout[i]) {
        case 'B':
        case 'b':
            *p++ = (unsigned char)f->number;
            break;
        case 'H':
            p = wr16(p, (uint16_t)f->number);
            break;
        case 'I':
            p = wr32(p, (uint32_t)f->number);
            break;
        case 'Q':
            p = wr64(p, f->number);
            break;
        case 't':
            memcpy(p, f->data, TID_SIZE);
            p += TID_SIZE;
            break;
        case 's':
            p = wr16(p, (uint16_t)f->size);
            memcpy(p, f->data, (size_t)f->size);
            p += f->size;
            break;
        case 'y':
            p = wr32(p, (uint32_t)f->size);
            memcpy(p, f->data, (size_t)f->size);
            p += f->size;
            break;
        case 'T':
            p = wr32(p, (uint32_t)f->size);
            for (Py_ssize_t k = 0; k < f->size; k++) {
                /* Checked above; read again because the buffers were released. */
                Py_buffer tid;
                if (get_tid(PySequence_Fast_GET_ITEM(f->sequence, k), &tid) < 0) {
                    Py_CLEAR(frame);
                    goto fail;
                }
                memcpy(p, tid.buf, TID_SIZE);
                PyBuffer_Release(&tid);
                p += TID_SIZE;
            }
            break;
        }
    }
fail:
    release_fields(fields, n_values);
    return frame;
}

static PyObject *encode(PyObject *module, PyObject *message)
{
    PyObject *code = PyDict_GetItemWithError(code_of_class, (PyObject *)Py_TYPE(message));
    if (code == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "not a cumulo frame: '%.100s'", Py_TYPE(message)->tp_name);
        return NULL;
    }
    /* Frame classes are tuple subclasses: their items are the fields. */
    return encode_fields((int)PyLong_AsLong(code), &PyTuple_GET_ITEM(message, 0), PyTuple_GET_SIZE(message));
}

static PyObject *encode_return(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_fields(TYPE_RETURN, args, nargs);
}

static PyObject *encode_send(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "encode_send() needs the frame type and the fields");
        return NULL;
    }
    long code = PyLong_AsLong(args[0]);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    if (code != TYPE_SEND_ASYNC && code != TYPE_SEND_SYNC && code != TYPE_MCAST_ASYNC && code != TYPE_FORWARD) {
        PyErr_Format(PyExc_ValueError, "0x%02lx is not a send frame type", code);
        return NULL;
    }
    return encode_fields((int)code, args + 1, nargs - 1);
}

static PyObject *encode_pong(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_fields(TYPE_PONG, args, nargs);
}

/* ---- module ------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode_frames", decode_frames, METH_VARARGS,
     "decode_frames(buf, start, end, max_frame) -> (frames, end_of_last_complete_frame)"},
    {"decode_frame", decode_frame, METH_VARARGS, "decode_frame(data, max_frame=None) -> message"},
    {"encode", encode, METH_O, "encode(message) -> bytes"},
    {"encode_return", (PyCFunction)(void (*)(void))encode_return, METH_FASTCALL,
     "encode_return(trans_id, status, response_info, response) -> bytes"},
    {"encode_send", (PyCFunction)(void (*)(void))encode_send, METH_FASTCALL,
     "encode_send(frame_type, trans_id, timeout, priority, flags, name, request_info, request) -> bytes"},
    {"encode_pong", (PyCFunction)(void (*)(void))encode_pong, METH_FASTCALL, "encode_pong(nonce) -> bytes"},
    {"serve", (PyCFunction)(void (*)(void))serve, METH_FASTCALL,
     "serve(api, timeout) -> bool: API.poll's loop in C (see serve.c)"},
    {"info_parse", info_parse, METH_O, "info_parse(data) -> [(key, value), ...] (cumulo.info.info_parse)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cumulo._ccodec",
    .m_doc = "The cumulo frame codec in C.",
    .m_size = -1,
    .m_methods = methods,
};

/* Read the frame classes and layouts from cumulo.messages.LAYOUTS. */
static int load_layouts(void)
{
    PyObject *messages = PyImport_ImportModule("cumulo.messages");
    if (messages == NULL)
        return -1;
    PyObject *layouts = PyObject_GetAttrString(messages, "LAYOUTS");
    Py_DECREF(messages);
    if (layouts == NULL)
        return -1;
    code_of_class = PyDict_New();
    if (code_of_class == NULL || !PyDict_Check(layouts))
        goto fail;
    PyObject *key, *entry;
    Py_ssize_t pos = 0;
    while (PyDict_Next(layouts, &pos, &key, &entry)) {
        PyObject *cls;
        const char *layout;
        long code = PyLong_AsLong(key);
        if (code < 0 || code > 255 || !PyArg_ParseTuple(entry, "Os", &cls, &layout))
            goto bad;
        if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) ||
            strlen(layout) > MAX_FIELDS)
            goto bad;
        Py_INCREF(cls);
        specs[code].cls = (PyTypeObject *)cls;
        strcpy(specs[code].layout, layout);
        specs[code].n_fields = (Py_ssize_t)strlen(layout);
        if (PyDict_SetItem(code_of_class, cls, key) < 0)
            goto fail;
    }
    Py_DECREF(layouts);
    return 0;
bad:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ImportError, "cumulo.messages.LAYOUTS is not {code: (tuple class, layout)}");
fail:
    Py_DECREF(layouts);
    return -1;
}

PyMODINIT_FUNC PyInit__ccodec(void)
{
    PyObject *errors = PyImport_ImportModule("cumulo.errors");
    if (errors == NULL)
        return NULL;
    DecodeError = PyObject_GetAttrString(errors, "DecodeError");
    Py_DECREF(errors);
    if (DecodeError == NULL || load_layouts() < 0 || serve_init() < 0)
        return NULL;
    return PyModule_Create(&module_def);
}
