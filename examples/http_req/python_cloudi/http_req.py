#!/usr/bin/env python3
"""http_req written against CloudI's own Python API (PyPI ``cloudi``), run
unchanged by cumulo (``protocol = "cloudi"``, docs/CLOUDI.md). Answers
``python_cloudi.xml/get`` exactly like ``examples/http_req/python``.

One CloudI API object per thread, as many as CLOUDI_API_INIT_THREAD_COUNT.
"""

import re
import sys
import threading

import cloudi

PATTERN = "python_cloudi.xml/get"
INTEGER = re.compile(rb"[+-]?[0-9]+\Z")
RESPONSE_INFO = b"content-type\x00text/xml; charset=utf-8\x00"
NO_VALUE = b"<http_test><error>no value specified</error></http_test>"


def parse_value(body):
    """The integer under key ``value`` (first occurrence) of well-formed
    key/value data (each key and value NUL-terminated), if it fits in 64 bits.
    Stricter than ``cloudi.API.info_key_value_parse``: malformed data has no value."""
    if not body.endswith(b"\x00"):
        return None
    fields = body[:-1].split(b"\x00")
    if len(fields) % 2:
        return None
    for key, value in zip(fields[::2], fields[1::2]):
        if key == b"value":
            if not INTEGER.match(value):
                return None
            number = int(value)
            return number if -(1 << 63) <= number < (1 << 63) else None
    return None


class Task(threading.Thread):
    def __init__(self, thread_index):
        threading.Thread.__init__(self)
        self.__api = cloudi.API(thread_index)

    def run(self):
        self.__api.subscribe(PATTERN, self.__request)
        self.__api.poll()  # returns when the core says to terminate

    def __request(self, request_type, name, pattern, request_info, request,
                  timeout, priority, trans_id, source):
        number = parse_value(request)
        if number is None:
            return RESPONSE_INFO, NO_VALUE
        return RESPONSE_INFO, b"<http_test><value>%d</value></http_test>" % number


def main():
    threads = [Task(i) for i in range(cloudi.API.thread_count())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    try:
        main()
    except cloudi.InvalidInputException:
        sys.stderr.write("http_req: not started by a CloudI-protocol core\n")
        sys.exit(1)
