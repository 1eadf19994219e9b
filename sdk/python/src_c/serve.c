/*
 * serve(api, timeout): the loop of cumulo.API.poll in C.
 *
 * The same steps as API.poll in api.py, on the same state (the API's read
 * buffer, output list, request queue and flags), so Python methods such as
 * send_sync may run in between and find everything where they expect it.
 * What is done here is the per-request work that dominated the Python loop:
 * reading the socket (GIL released), splitting and decoding frames, queueing
 * REQUESTs, answering PING, calling the handler, encoding its RETURN and
 * writing the batch. Everything unusual goes back to the Python methods of
 * the API (_run_handlers, _flush, _make_room, _abort, _no_handler,
 * _handler_failed, _finish, _unexpected and the _dispatch table, and
 * _enter_trace for a request that carries a trace context), so there
 * is one implementation of each rule and the public behaviour is identical.
 */
#include "codec.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

/* api.py's READ_SIZE; a buffer larger than 16 of these is shrunk by _make_room. */
#define READ_SIZE (64 * 1024)

static PyObject *ConnectionClosed; /* cumulo.errors.ConnectionClosed */
static PyObject *zero;             /* the status OK, as an int */

/* Interned attribute and method names of cumulo.API. */
static PyObject *s_sock, *s_fileno, *s_rbuf, *s_rstart, *s_rend, *s_out, *s_requests, *s_terminated,
    *s_closed, *s_handlers, *s_forwarded, *s_max_frame, *s_recv_limit, *s_dispatch, *s_in_handlers,
    *s_timeout, *s_run_handlers, *s_flush, *s_abort, *s_make_room, *s_set_timeout, *s_no_handler,
    *s_handler_failed, *s_finish, *s_unexpected, *s_append, *s_popleft, *s_enter_trace, *s_trace;

static double monotonic(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock of Python's time.monotonic */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- small helpers on the API object ------------------------------------- */

static int attr_true(PyObject *api, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(api, name);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

static int attr_ssize(PyObject *api, PyObject *name, Py_ssize_t *out)
{
    PyObject *value = PyObject_GetAttr(api, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsSsize_t(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_ssize(PyObject *api, PyObject *name, Py_ssize_t v)
{
    PyObject *value = PyLong_FromSsize_t(v);
    if (value == NULL)
        return -1;
    int rc = PyObject_SetAttr(api, name, value);
    Py_DECREF(value);
    return rc;
}

/* Call api.<name>(*args); returns 0, or -1 with the exception set. */
static int call_method(PyObject *api, PyObject *name, PyObject *arg1, PyObject *arg2)
{
    PyObject *args[3] = {api, arg1, arg2};
    size_t n = arg1 == NULL ? 1 : arg2 == NULL ? 2 : 3;
    PyObject *result = PyObject_VectorcallMethod(name, args, n, NULL);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

static Py_ssize_t queued_requests(PyObject *api)
{
    PyObject *requests = PyObject_GetAttr(api, s_requests);
    if (requests == NULL)
        return -1;
    Py_ssize_t n = PyObject_Size(requests);
    Py_DECREF(requests);
    return n;
}

/* Close the connection (api._abort()) and raise ConnectionClosed(message), or its default message if NULL. */
static int connection_closed(PyObject *api, const char *message)
{
    if (call_method(api, s_abort, NULL, NULL) < 0)
        return -1;
    PyObject *exc = message != NULL ? PyObject_CallFunction(ConnectionClosed, "s", message)
                                    : PyObject_CallNoArgs(ConnectionClosed);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

static int io_error(PyObject *api, const char *what, int err)
{
    char message[256];
    /* The words of api.py, which formats the OSError the same way. */
    PyOS_snprintf(message, sizeof(message), "%s from the core failed: [Errno %d] %s", what, err, strerror(err));
    return connection_closed(api, message);
}

static int raise_if_closed(PyObject *api)
{
    int closed = attr_true(api, s_closed);
    if (closed > 0) {
        PyObject *exc = PyObject_CallFunction(ConnectionClosed, "s", "the connection is closed");
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            Py_DECREF(exc);
        }
        return -1;
    }
    return closed;
}

static int socket_fd(PyObject *api)
{
    PyObject *sock = PyObject_GetAttr(api, s_sock);
    if (sock == NULL)
        return -1;
    PyObject *fd = PyObject_CallMethodNoArgs(sock, s_fileno);
    Py_DECREF(sock);
    if (fd == NULL)
        return -1;
    long v = PyLong_AsLong(fd);
    Py_DECREF(fd);
    return (int)v;
}

/* ---- writing ------------------------------------------------------------- */

/* Write all of data, the GIL released; returns 0 or an errno. */
static int write_all(int fd, const char *data, Py_ssize_t size)
{
    while (size > 0) {
        ssize_t n;
        int err;
        Py_BEGIN_ALLOW_THREADS
        n = send(fd, data, (size_t)size, MSG_DONTWAIT | MSG_NOSIGNAL);
        err = errno;
        Py_END_ALLOW_THREADS
        if (n >= 0) {
            data += n;
            size -= n;
            continue;
        }
        if (err == EAGAIN || err == EWOULDBLOCK) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int r;
            Py_BEGIN_ALLOW_THREADS
            r = poll(&p, 1, -1);
            err = errno;
            Py_END_ALLOW_THREADS
            if (r < 0 && err != EINTR)
                return err;
        } else if (err != EINTR) {
            return err;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
    return 0;
}

/* api._flush(): write the queued frames in one go. */
static int flush(PyObject *api, int fd)
{
    PyObject *out = PyObject_GetAttr(api, s_out);
    if (out == NULL)
        return -1;
    int rc = 0;
    Py_ssize_t n = PyList_Check(out) ? PyList_GET_SIZE(out) : 0;
    if (n == 0)
        goto done;
    if ((rc = raise_if_closed(api)) < 0)
        goto done;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(out, i))) { /* not ours: the Python way */
            rc = call_method(api, s_flush, NULL, NULL);
            goto done;
        }
        total += PyBytes_GET_SIZE(PyList_GET_ITEM(out, i));
    }
    PyObject *data;
    if (n == 1) {
        data = PyList_GET_ITEM(out, 0);
        Py_INCREF(data);
    } else {
        data = PyBytes_FromStringAndSize(NULL, total);
        if (data == NULL) {
            rc = -1;
            goto done;
        }
        char *p = PyBytes_AS_STRING(data);
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *frame = PyList_GET_ITEM(out, i);
            memcpy(p, PyBytes_AS_STRING(frame), (size_t)PyBytes_GET_SIZE(frame));
            p += PyBytes_GET_SIZE(frame);
        }
    }
    rc = PyList_SetSlice(out, 0, n, NULL);
    if (rc == 0) {
        int err = write_all(fd, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
        if (err > 0)
            rc = io_error(api, "write to", err);
        else
            rc = err;
    }
    Py_DECREF(data);
done:
    Py_DECREF(out);
    return rc;
}

/* ---- reading ------------------------------------------------------------- */

/*
 * Read once into the API's buffer, waiting up to `timeout` seconds (< 0:
 * forever), the GIL released. Returns the bytes read, 0 if nothing came in
 * time, -1 with an exception set.
 */
static Py_ssize_t read_some(PyObject *api, int fd, char *buf, Py_ssize_t room, double timeout)
{
    double deadline = timeout < 0 ? 0 : monotonic() + timeout;
    for (;;) {
        ssize_t n;
        int err;
        Py_BEGIN_ALLOW_THREADS
        /* Without a deadline the socket is blocking (API._set_timeout(None)): one system call. */
        n = recv(fd, buf, (size_t)room, timeout < 0 ? 0 : MSG_DONTWAIT);
        err = errno;
        Py_END_ALLOW_THREADS
        if (n > 0)
            return n;
        if (n == 0)
            return connection_closed(api, NULL);
        if (err == EAGAIN || err == EWOULDBLOCK) {
            int wait_ms = -1;
            if (timeout >= 0) {
                double left = deadline - monotonic();
                if (left <= 0)
                    return 0;
                wait_ms = (int)ceil(left * 1000.0);
            }
            struct pollfd p = {.fd = fd, .events = POLLIN};
            int r;
            Py_BEGIN_ALLOW_THREADS
            r = poll(&p, 1, wait_ms);
            err = errno;
            Py_END_ALLOW_THREADS
            if (r == 0 && timeout >= 0 && monotonic() >= deadline)
                return 0;
            if (r < 0 && err != EINTR)
                return io_error(api, "read from", err);
        } else if (err != EINTR) {
            return io_error(api, "read from", err);
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

/* Queue REQUESTs, answer PINGs, hand every other frame to api._dispatch. */
static int dispatch(PyObject *api, PyObject *frames)
{
    PyObject *requests = NULL, *out = NULL, *table = NULL;
    int rc = -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(frames); i++) {
        PyObject *frame = PyList_GET_ITEM(frames, i);
        PyObject *result;
        if (Py_TYPE(frame) == specs[TYPE_REQUEST].cls) {
            if (requests == NULL && (requests = PyObject_GetAttr(api, s_requests)) == NULL)
                goto done;
            result = PyObject_CallMethodOneArg(requests, s_append, frame);
        } else if (Py_TYPE(frame) == specs[TYPE_PING].cls) {
            if (out == NULL && (out = PyObject_GetAttr(api, s_out)) == NULL)
                goto done;
            PyObject *pong = encode_fields(TYPE_PONG, &PyTuple_GET_ITEM(frame, 0), 1);
            if (pong == NULL)
                goto done;
            int appended = PyList_Append(out, pong);
            Py_DECREF(pong);
            if (appended < 0)
                goto done;
            continue;
        } else {
            if (table == NULL && (table = PyObject_GetAttr(api, s_dispatch)) == NULL)
                goto done;
            PyObject *handler = PyDict_GetItemWithError(table, (PyObject *)Py_TYPE(frame));
            if (handler == NULL) {
                if (PyErr_Occurred() || call_method(api, s_unexpected, frame, NULL) < 0)
                    goto done;
                continue; /* _unexpected raises; not reached */
            }
            result = PyObject_CallOneArg(handler, frame);
        }
        if (result == NULL)
            goto done;
        Py_DECREF(result);
    }
    rc = 0;
done:
    Py_XDECREF(requests);
    Py_XDECREF(out);
    Py_XDECREF(table);
    return rc;
}

/* api._receive(timeout): read once and dispatch the complete frames; 1, 0 (timed out) or -1. */
static int receive(PyObject *api, int fd, double timeout)
{
    if (raise_if_closed(api) < 0)
        return -1;
    if (timeout < 0) {
        /* Blocking mode for a wait without deadline, as API._receive(None) sets it. */
        PyObject *current = PyObject_GetAttr(api, s_timeout);
        if (current == NULL)
            return -1;
        int blocking = current == Py_None;
        Py_DECREF(current);
        if (!blocking && call_method(api, s_set_timeout, Py_None, NULL) < 0)
            return -1;
    }
    Py_ssize_t start, end, limit;
    if (attr_ssize(api, s_rstart, &start) < 0 || attr_ssize(api, s_rend, &end) < 0 ||
        attr_ssize(api, s_recv_limit, &limit) < 0)
        return -1;
    PyObject *rbuf = PyObject_GetAttr(api, s_rbuf);
    if (rbuf == NULL)
        return -1;
    Py_buffer view; /* held while the GIL is released: the bytearray cannot be resized */
    if (PyObject_GetBuffer(rbuf, &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(rbuf);
        return -1;
    }
    Py_DECREF(rbuf);
    Py_ssize_t capacity = view.len;
    if (start < 0 || start > end || end >= capacity) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_SystemError, "cumulo.API read buffer state is inconsistent");
        return -1;
    }
    Py_ssize_t n = read_some(api, fd, (char *)view.buf + end, capacity - end, timeout);
    if (n <= 0) {
        PyBuffer_Release(&view);
        return (int)n;
    }
    end += n;
    PyObject *decoded = decode_range((const unsigned char *)view.buf, start, end, (uint64_t)limit);
    PyBuffer_Release(&view);
    if (set_ssize(api, s_rend, end) < 0) {
        Py_XDECREF(decoded);
        return -1;
    }
    if (decoded == NULL) {
        if (PyErr_ExceptionMatches(DecodeError)) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            int aborted = call_method(api, s_abort, NULL, NULL);
            PyErr_Restore(type, value, tb);
            (void)aborted;
        }
        return -1;
    }
    PyObject *frames = PyTuple_GET_ITEM(decoded, 0);
    start = PyLong_AsSsize_t(PyTuple_GET_ITEM(decoded, 1));
    int rc = set_ssize(api, s_rstart, start);
    /* api._make_room(), done here in the common case: everything was consumed. */
    if (rc == 0) {
        if (start == end && capacity <= 16 * READ_SIZE)
            rc = (set_ssize(api, s_rstart, 0) < 0 || set_ssize(api, s_rend, 0) < 0) ? -1 : 0;
        else
            rc = call_method(api, s_make_room, NULL, NULL);
    }
    if (rc == 0)
        rc = dispatch(api, frames);
    Py_DECREF(decoded);
    return rc < 0 ? -1 : 1;
}

/* ---- handling ------------------------------------------------------------ */

/* api._handle(request): call the handler and queue its RETURN. */
static int handle(PyObject *api, PyObject *request, PyObject *out, Py_ssize_t max_frame)
{
    /* A request that may carry a traceparent (PROTOCOL.md 5.1): its handler runs in
     * its trace context (api._trace, set by api._enter_trace); the others pay one check. */
    PyObject *info = PyTuple_GET_ITEM(request, REQUEST_INFO);
    int traced = PyBytes_Check(info) && PyBytes_GET_SIZE(info) > 0 &&
                 memmem(PyBytes_AS_STRING(info), (size_t)PyBytes_GET_SIZE(info), "traceparent",
                        sizeof("traceparent")) != NULL; /* the key and its NUL */

    PyObject *handlers = PyObject_GetAttr(api, s_handlers);
    if (handlers == NULL)
        return -1;
    PyObject *handler = PyDict_GetItemWithError(handlers, PyTuple_GET_ITEM(request, REQUEST_PATTERN));
    Py_XINCREF(handler);
    Py_DECREF(handlers);
    if (handler == NULL)
        return PyErr_Occurred() ? -1 : call_method(api, s_no_handler, request, NULL);

    /* The trace context the handler replaces (None outside handlers), put back after it. */
    PyObject *outer = NULL;
    if (traced && (outer = PyObject_CallMethodOneArg(api, s_enter_trace, info)) == NULL) {
        Py_DECREF(handler);
        return -1;
    }
    PyObject *args[2] = {api, request};
    PyObject *result = PyObject_Vectorcall(handler, args, 2, NULL);
    Py_DECREF(handler);
    if (outer != NULL) {
        /* Keeps the handler's exception, if any, across the attribute's write. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        int rc = PyObject_SetAttr(api, s_trace, outer);
        Py_DECREF(outer);
        if (rc < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            Py_XDECREF(result);
            return -1;
        }
        PyErr_Restore(type, value, tb);
    }
    if (result == NULL) {
        /* As `except Exception` in api.py: anything else (KeyboardInterrupt...) goes up. */
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        int closed = attr_true(api, s_closed);
        if (closed != 0) { /* closed by the handler: its exception goes up (or the attribute's error) */
            if (closed > 0)
                PyErr_Restore(type, value, tb);
            else {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
            }
            return -1;
        }
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL)
            PyException_SetTraceback(value, tb);
        int rc = call_method(api, s_handler_failed, request, value);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return rc;
    }

    /* The common case: (bytes, bytes) for a request that was not forwarded. */
    PyObject *forwarded = PyObject_GetAttr(api, s_forwarded);
    if (forwarded == NULL) {
        Py_DECREF(result);
        return -1;
    }
    int plain = PyAnySet_Check(forwarded) && PySet_GET_SIZE(forwarded) == 0 && PyTuple_CheckExact(result) &&
                PyTuple_GET_SIZE(result) == 2 && PyBytes_CheckExact(PyTuple_GET_ITEM(result, 0)) &&
                PyBytes_CheckExact(PyTuple_GET_ITEM(result, 1));
    Py_DECREF(forwarded);
    if (plain) {
        PyObject *fields[4] = {PyTuple_GET_ITEM(request, REQUEST_TRANS_ID), zero, PyTuple_GET_ITEM(result, 0),
                               PyTuple_GET_ITEM(result, 1)};
        PyObject *frame = encode_fields(TYPE_RETURN, fields, 4);
        if (frame == NULL) {
            Py_DECREF(result);
            return -1;
        }
        if (PyBytes_GET_SIZE(frame) - 4 <= max_frame) {
            int rc = PyList_Append(out, frame);
            Py_DECREF(frame);
            Py_DECREF(result);
            return rc;
        }
        Py_DECREF(frame); /* too large: _finish answers TOO_LARGE */
    }
    int rc = call_method(api, s_finish, request, result);
    Py_DECREF(result);
    return rc;
}

/* api._run_handlers(): every queued request, in order, with sends batched. */
static int run_handlers(PyObject *api)
{
    PyObject *requests = PyObject_GetAttr(api, s_requests);
    PyObject *out = PyObject_GetAttr(api, s_out);
    Py_ssize_t max_frame;
    int rc = -1;
    if (requests == NULL || out == NULL || !PyList_Check(out) || attr_ssize(api, s_max_frame, &max_frame) < 0) {
        if (!PyErr_Occurred()) /* _out is not a list: let Python do it */
            rc = call_method(api, s_run_handlers, NULL, NULL);
        goto done;
    }
    if (PyObject_SetAttr(api, s_in_handlers, Py_True) < 0)
        goto done;
    rc = 0;
    for (;;) {
        Py_ssize_t left = PyObject_Size(requests);
        if (left <= 0) {
            rc = (int)left;
            break;
        }
        PyObject *request = PyObject_CallMethodNoArgs(requests, s_popleft);
        if (request == NULL) {
            rc = -1;
            break;
        }
        rc = handle(api, request, out, max_frame);
        Py_DECREF(request);
        if (rc < 0)
            break;
    }
    /* As the `finally` of api.py: restored even when a handler's exception goes up. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (PyObject_SetAttr(api, s_in_handlers, Py_False) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        rc = -1;
    } else {
        PyErr_Restore(type, value, tb);
    }
done:
    Py_XDECREF(requests);
    Py_XDECREF(out);
    return rc;
}

/* ---- the loop ------------------------------------------------------------ */

/* True if nothing is left to do before poll may return on its deadline. */
static int idle(PyObject *api)
{
    Py_ssize_t queued = queued_requests(api);
    if (queued < 0)
        return -1;
    if (queued > 0)
        return 0;
    int terminated = attr_true(api, s_terminated);
    return terminated < 0 ? -1 : !terminated;
}

PyObject *serve(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "serve(api, timeout) takes 2 arguments");
        return NULL;
    }
    PyObject *api = args[0];
    int forever = args[1] == Py_None;
    double deadline = 0;
    if (!forever) {
        double timeout_ms = PyFloat_AsDouble(args[1]);
        if (timeout_ms == -1.0 && PyErr_Occurred())
            return NULL;
        deadline = monotonic() + timeout_ms / 1000.0;
    }
    for (;;) {
        Py_ssize_t queued = queued_requests(api);
        if (queued < 0 || (queued > 0 && run_handlers(api) < 0))
            return NULL;
        int terminated = attr_true(api, s_terminated);
        if (terminated < 0)
            return NULL;
        if (terminated) {
            if (call_method(api, s_flush, NULL, NULL) < 0)
                return NULL;
            Py_RETURN_FALSE;
        }
        /* Looked up each turn: a handler may have closed the API (flush and receive then raise). */
        int closed = attr_true(api, s_closed);
        if (closed < 0)
            return NULL;
        int fd = -1;
        if (!closed && (fd = socket_fd(api)) < 0 && PyErr_Occurred())
            return NULL;
        if (flush(api, fd) < 0)
            return NULL;
        if (forever) {
            if (receive(api, fd, -1.0) < 0)
                return NULL;
            continue;
        }
        double remaining = deadline - monotonic();
        int got = receive(api, fd, remaining > 0 ? remaining : 0.0);
        if (got < 0)
            return NULL;
        if (!got || remaining <= 0) {
            int nothing_left = idle(api);
            if (nothing_left < 0)
                return NULL;
            if (nothing_left)
                Py_RETURN_TRUE;
        }
    }
}

/* ---- module setup -------------------------------------------------------- */

int serve_init(void)
{
    PyObject *errors = PyImport_ImportModule("cumulo.errors");
    if (errors == NULL)
        return -1;
    ConnectionClosed = PyObject_GetAttrString(errors, "ConnectionClosed");
    Py_DECREF(errors);
    if (ConnectionClosed == NULL)
        return -1;
    if ((zero = PyLong_FromLong(STATUS_OK)) == NULL)
        return -1;
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {
        {&s_sock, "_sock"}, {&s_fileno, "fileno"}, {&s_rbuf, "_rbuf"}, {&s_rstart, "_rstart"},
        {&s_rend, "_rend"}, {&s_out, "_out"}, {&s_requests, "_requests"}, {&s_terminated, "_terminated"},
        {&s_closed, "_closed"}, {&s_handlers, "_handlers"}, {&s_forwarded, "_forwarded"},
        {&s_max_frame, "_max_frame"}, {&s_recv_limit, "_recv_limit"}, {&s_dispatch, "_dispatch"},
        {&s_in_handlers, "_in_handlers"}, {&s_timeout, "_timeout"}, {&s_run_handlers, "_run_handlers"},
        {&s_flush, "_flush"}, {&s_abort, "_abort"}, {&s_make_room, "_make_room"},
        {&s_set_timeout, "_set_timeout"}, {&s_no_handler, "_no_handler"},
        {&s_handler_failed, "_handler_failed"}, {&s_finish, "_finish"}, {&s_unexpected, "_unexpected"},
        {&s_append, "append"}, {&s_popleft, "popleft"}, {&s_enter_trace, "_enter_trace"},
        {&s_trace, "_trace"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return -1;
    return 0;
}
