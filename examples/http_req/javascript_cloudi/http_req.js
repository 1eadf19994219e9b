// http_req written against CloudI's own JavaScript API (npm `cloudi`), run
// unchanged by cumulo (protocol = "cloudi", docs/CLOUDI.md). Answers
// `javascript_cloudi.xml/get` exactly like examples/http_req/javascript.
//
// One CloudI API object per thread (CLOUDI_API_INIT_THREAD_COUNT), all on
// Node's one event loop, each on its own socket.

'use strict';

const CloudI = require('cloudi').CloudI;

// CloudI's API returns from a request handler by throwing an Error it builds
// for the purpose, and reads that Error's stack, every request: formatting
// the stack took a fifth of this service's CPU (85 against 110 us per
// request without it). Errors thrown here carry their message but no stack.
Error.stackTraceLimit = 0;

const PATTERN = 'javascript_cloudi.xml/get';
const RESPONSE_INFO = 'content-type\x00text/xml; charset=utf-8\x00';
const NO_VALUE = '<http_test><error>no value specified</error></http_test>';
const INTEGER = /^[+-]?[0-9]+$/;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

// The integer under key `value` (first occurrence) of well-formed key/value
// data (each key and value NUL-terminated), if it fits in 64 bits; stricter
// than CloudI's info_key_value_parse: malformed data has no value.
function valueOf(body) {
    const text = body.toString('binary');
    if (!text.endsWith('\x00')) {
        return null;
    }
    const fields = text.slice(0, -1).split('\x00');
    if (fields.length % 2 != 0) {
        return null;
    }
    for (let i = 0; i < fields.length; i += 2) {
        if (fields[i] == 'value') {
            if (!INTEGER.test(fields[i + 1])) {
                return null;
            }
            const n = BigInt(fields[i + 1]);
            return n >= I64_MIN && n <= I64_MAX ? n.toString() : null;
        }
    }
    return null;
}

function Task(threadIndex) {
    this.threadIndex = threadIndex;
}

Task.prototype.run = function () {
    const task = this;
    new CloudI.API(task.threadIndex, function (api) {
        task.api = api;
        api.subscribe(PATTERN, task, task.request, function () {
            api.poll(function (timeout) {
                process.stdout.write('http_req javascript_cloudi: terminated\n');
            });
        });
    });
};

Task.prototype.request = function (requestType, name, pattern, requestInfo, request,
                                   timeout, priority, transId, source) {
    const value = valueOf(request);
    const response = value === null ? NO_VALUE : '<http_test><value>' + value + '</value></http_test>';
    this.api.return_(requestType, name, pattern, RESPONSE_INFO, response, timeout, transId, source);
};

for (let i = 0; i < CloudI.API.thread_count(); i++) {
    new Task(i).run();
}
