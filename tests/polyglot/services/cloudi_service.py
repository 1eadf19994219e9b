#!/usr/bin/env python3
"""A test service written against CloudI's own Python API (PyPI ``cloudi``),
run by the core with ``protocol = "cloudi"``: each pattern exercises one
CloudI call against the core (test_cloudi.py says what each must answer).

The request of ``send_sync``, ``send_async`` and ``forward`` is
``name\\ntimeout_ms\\nbody``: whom to call, with what.
"""

import os
import sys
import threading
import time

import cloudi


def call_args(request):
    """(name, timeout, body) of a request ``name\\ntimeout\\nbody``."""
    name, timeout, body = request.split(b"\n", 2)
    return name.decode(), int(timeout), body


class Task(threading.Thread):
    def __init__(self, thread_index):
        threading.Thread.__init__(self)
        self.api = cloudi.API(thread_index)
        self.index = thread_index

    def run(self):
        api = self.api
        api.subscribe("send_sync", self.send_sync)
        api.subscribe("send_async", self.send_async)
        api.subscribe("mcast", self.mcast)
        api.subscribe("member", self.member)
        api.subscribe("sleep", self.sleep)
        api.subscribe("null", self.null)
        api.subscribe("forward", self.forward)
        api.subscribe("count", self.count)
        api.subscribe("expire", self.expire)
        api.subscribe("echo/*", self.echo)
        api.subscribe("self_send", self.self_send)
        api.subscribe("mcast_to", self.mcast_to)
        api.subscribe("oldest", self.oldest)
        api.subscribe("delay", self.delay)
        api.subscribe("whoami", self.whoami)
        api.subscribe("protocol_error", self.protocol_error)
        for _ in range(3):
            api.subscribe("triple", self.whoami)
        api.subscribe("best/*", self.star)
        if self.index == 0:
            api.subscribe("best/x", self.whoami)
        api.poll()
        sys.stdout.write("thread %d: terminated\n" % self.index)
        sys.stdout.flush()

    # Each handler: (request_type, name, pattern, request_info, request,
    # timeout, priority, trans_id, source) as CloudI's API calls it.
    def send_sync(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        target, timeout_ms, body = call_args(request)
        info, response, tid = self.api.send_sync(target, body, timeout=timeout_ms)
        if tid == b"\x00" * 16:
            return b"timeout"
        return info, response

    def send_async(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        target, timeout_ms, body = call_args(request)
        tid = self.api.send_async(target, body, timeout=timeout_ms)
        info, response, got = self.api.recv_async(timeout=timeout_ms + 1000, trans_id=tid)
        if got == b"\x00" * 16:
            return b"timeout"
        assert got == tid
        return info, response

    def expire(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        """Two send_async, one with timeout_ms, one with ten times that;
        recv_async on each after twice timeout_ms: is each answer still kept?"""
        target, timeout_ms, body = call_args(request)
        short = self.api.send_async(target, body, timeout=timeout_ms)
        long = self.api.send_async(target, body, timeout=timeout_ms * 10)
        time.sleep(timeout_ms * 2 / 1000.0)
        _, _, got_short = self.api.recv_async(timeout=200, trans_id=short)
        _, response, got_long = self.api.recv_async(timeout=200, trans_id=long)
        return b"%s|%s" % (b"kept" if got_short == short else b"gone", response if got_long == long else b"gone")

    def mcast(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        tids = self.api.mcast_async(self.api.prefix() + "member", request, timeout=1000)
        # Collected in the order they come: an answer is only kept until
        # its request's deadline, so waiting first for a copy that times out
        # would let the other answer expire meanwhile (as in CloudI).
        answers = []
        for _ in tids:
            _, response, got = self.api.recv_async(timeout=2000)
            answers.append(response if got in tids else b"timeout")
        # nothing left over
        _, _, left = self.api.recv_async(timeout=50)
        return b"%d:%s:%s" % (len(tids), b",".join(sorted(answers)), b"empty" if left == b"\x00" * 16 else b"left")

    def member(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return b"member-" + request

    def sleep(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        time.sleep(int(request) / 1000.0)
        return b"slept"

    def null(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return b""

    def forward(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        target, _, body = call_args(request)
        self.api.forward_(request_type, target, request_info, body, timeout, priority, trans_id, source)

    def count(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return b"%d" % self.api.subscribe_count("count")

    def echo(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return request_info, b"%s|%s|%s|%d" % (name.encode(), pattern.encode(), request, priority)


    # CloudI's routing rules (docs/CLOUDI.md, "Routing as in CloudI").
    def self_send(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        """``count`` send_sync to whoami, which every thread subscribes:
        ``me:answers from others:answers from me:timeouts``."""
        others = mine = timeouts = 0
        for _ in range(int(request)):
            _, response, tid = self.api.send_sync(self.api.prefix() + "whoami", b"", timeout=2000)
            if tid == b"\x00" * 16:
                timeouts += 1
            elif response == b"%d" % self.index:
                mine += 1
            else:
                others += 1
        return b"%d:%d:%d:%d" % (self.index, others, mine, timeouts)

    def mcast_to(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        """mcast_async to the name in the request, every answer collected:
        ``me:copies:sorted answers`` (``timeout`` for a copy never answered)."""
        tids = self.api.mcast_async(self.api.prefix() + request.decode(), b"", timeout=1500)
        answers = []
        for _ in tids:
            _, response, got = self.api.recv_async(timeout=3000)
            answers.append(response if got in tids else b"timeout")
        return b"%d:%d:%s" % (self.index, len(tids), b",".join(sorted(answers)))

    def oldest(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        """send_async(slow), send_async(fast), both answered, then recv_async
        twice with no trans_id: CloudI hands out the oldest request's first."""
        self.api.send_async(self.api.prefix() + "delay", b"400", timeout=5000)
        self.api.send_async(self.api.prefix() + "delay", b"0", timeout=5000)
        time.sleep(1.2)
        first = self.api.recv_async(timeout=1000)[1]
        second = self.api.recv_async(timeout=1000)[1]
        return first + b"," + second

    def delay(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        time.sleep(int(request) / 1000.0)
        return b"delay-" + request

    def whoami(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return b"%d" % self.index

    def star(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        return b"star-%d" % self.index

    def protocol_error(self, request_type, name, pattern, request_info, request, timeout, priority, trans_id, source):
        """A send_sync whose name is not a string: the core closes this
        thread's connection and, as CloudI, kills the process."""
        sys.stdout.write("pid %d: sending a malformed send_sync\n" % os.getpid())
        sys.stdout.flush()
        self.api.send_sync(42, b"")
        return b"not reached"


def main():
    threads = [Task(i) for i in range(cloudi.API.thread_count())]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
