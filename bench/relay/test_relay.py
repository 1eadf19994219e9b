"""Protocol tests for the relay over a real Unix socket.

Run: python3 -m unittest -v bench/relay/test_relay.py   (builds with make first)
"""
import os
import socket
import struct
import subprocess
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
(HELLO, SUBSCRIBE, UNSUBSCRIBE, SUBSCRIBE_COUNT, SEND_ASYNC, SEND_SYNC, RETURN, PING, PONG,
 WELCOME, REQUEST, RESPONSE, REPLY, ERROR) = (
    0x01, 0x02, 0x03, 0x04, 0x10, 0x11, 0x20, 0x30, 0x31, 0x81, 0x82, 0x83, 0x84, 0x87)
OK, NO_SERVICE, CRASHED, MALFORMED, TOO_LARGE, INVALID_ARGUMENT = 0, 2, 4, 5, 8, 9
UNSUPPORTED_VERSION, UNAUTHORIZED, PROTOCOL = 10, 11, 12


def frame(ftype, body):
    return struct.pack("<IB", len(body) + 1, ftype) + body


def pstr(b):
    return struct.pack("<H", len(b)) + b


def pbytes(b):
    return struct.pack("<I", len(b)) + b


def hello(window=1, prefix=b"/bench/", token=b"", version=1):
    return frame(HELLO, struct.pack("<HII", version, window, 0) + pstr(token) + pstr(prefix))


def control(ftype, req_id, pattern):
    return frame(ftype, struct.pack("<I", req_id) + pstr(pattern))


def send(tid, name, request=b"", info=b"", ftype=SEND_ASYNC):
    return frame(ftype, tid + struct.pack("<IbB", 0, 0, 0) + pstr(name) + pbytes(info) + pbytes(request))


def ret(tid, response=b"", info=b"", status=OK):
    return frame(RETURN, tid + struct.pack("<H", status) + pbytes(info) + pbytes(response))


def status_of(body):  # RESPONSE: trans_id then status
    return struct.unpack("<H", body[16:18])[0]


class Peer:
    """One connection to the relay, read frame by frame."""

    def __init__(self, path, **hello_args):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
        self.sock.settimeout(3)
        self.node = self.iid = self.window = None
        self.hello_args = hello_args

    def welcome(self):
        self.sock.sendall(hello(**self.hello_args))
        ftype, body = self.recv()
        assert ftype == WELCOME, hex(ftype)
        _, self.node, self.iid, _, _, _, self.window = struct.unpack("<HIIIIII", body[:26])
        return self

    def tid(self):
        return struct.pack(">QII", time.time_ns(), self.node, self.iid)

    def _exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def recv(self, timeout=3):
        """(type, body), or None when the relay closed the connection."""
        self.sock.settimeout(timeout)
        head = self._exact(4)
        if head is None:
            return None
        rest = self._exact(struct.unpack("<I", head)[0])
        return (rest[0], rest[1:]) if rest else None

    def silent(self, seconds=0.3):
        try:
            return self.recv(seconds) is None
        except socket.timeout:
            return True

    def send(self, data):
        self.sock.sendall(data)

    def close(self):
        self.sock.close()


class RelayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["make", "-s", "-C", HERE], check=True)
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "relay.sock")
        cls.relay = subprocess.Popen([os.path.join(HERE, "build", "relay"), cls.path],
                                     stderr=subprocess.DEVNULL)
        for _ in range(50):
            if os.path.exists(cls.path):
                break
            time.sleep(0.1)

    @classmethod
    def tearDownClass(cls):
        cls.relay.terminate()
        cls.relay.wait()
        cls.dir.cleanup()

    def setUp(self):
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            p.close()
        self.assertIsNone(self.relay.poll(), "the relay must survive every test")

    def peer(self, **hello_args):
        p = Peer(self.path, **hello_args)
        self.peers.append(p)
        return p.welcome()

    def receiver(self, pattern, window=1):
        r = self.peer(window=window)
        r.send(control(SUBSCRIBE, 1, pattern))
        self.assertEqual(r.recv()[0], REPLY)
        return r

    def assert_error(self, data, status, hello_first=True):
        p = Peer(self.path)
        self.peers.append(p)
        if hello_first:
            p.welcome()
        p.send(data)
        ftype, body = p.recv()
        self.assertEqual((ftype, struct.unpack("<H", body[:2])[0]), (ERROR, status))
        self.assertIsNone(p.recv(), "the connection must be closed after ERROR")

    def test_handshake_errors(self):
        self.assert_error(frame(PING, bytes(8)), PROTOCOL, hello_first=False)
        self.assert_error(hello(token=b"c0ffee"), UNAUTHORIZED, hello_first=False)
        self.assert_error(hello(version=0), UNSUPPORTED_VERSION, hello_first=False)
        self.assert_error(hello(prefix=b"bench/"), INVALID_ARGUMENT, hello_first=False)
        self.assert_error(frame(HELLO, hello()[5:] + b"x"), MALFORMED, hello_first=False)
        self.assert_error(hello(), PROTOCOL)

    def test_frame_errors(self):
        self.assert_error(struct.pack("<IB", 9 << 20, SEND_ASYNC), TOO_LARGE)
        self.assert_error(bytes(4), MALFORMED)
        self.assert_error(frame(SEND_ASYNC, bytes(18)), MALFORMED)
        self.assert_error(frame(0x7E, b""), MALFORMED)
        self.assert_error(frame(PING, bytes(7)), MALFORMED)
        self.assert_error(send(bytes(16), b"/\xff"), MALFORMED)

    def test_welcome_and_control(self):
        a, b = self.peer(window=5000), self.peer()
        self.assertEqual((a.node, a.window, b.iid), (1, 1024, a.iid + 1))
        a.send(control(SUBSCRIBE, 7, b"x") + control(SUBSCRIBE, 8, b"x") + control(SUBSCRIBE_COUNT, 9, b"x")
               + control(UNSUBSCRIBE, 10, b"y") + control(SUBSCRIBE, 11, b"a*"))
        replies = [struct.unpack("<IHI", a.recv()[1][:10]) for _ in range(5)]
        self.assertEqual(replies[:3], [(7, OK, 0), (8, OK, 0), (9, OK, 2)])
        self.assertEqual(replies[3][:2], (10, INVALID_ARGUMENT))
        self.assertEqual(replies[4][:2], (11, INVALID_ARGUMENT))   # no wildcards in the relay
        a.send(frame(PING, struct.pack("<Q", 42)))
        self.assertEqual(a.recv(), (PONG, struct.pack("<Q", 42)))

    def test_request_round_trip(self):
        r, c = self.receiver(b"rt"), self.peer()
        tid = c.tid()
        c.send(send(tid, b"/bench/rt", b"hi", b"k\0v\0", ftype=SEND_SYNC))
        ftype, body = r.recv()
        self.assertEqual((ftype, body[:16], body[21]), (REQUEST, tid, 1))          # flags: SYNC
        self.assertEqual(struct.unpack("<Q", body[22:30])[0], 1 << 32 | c.iid)      # source
        rest = body[30:]
        self.assertEqual(rest, pstr(b"/bench/rt") * 2 + pbytes(b"k\0v\0") + pbytes(b"hi"))
        c.send(send(tid, b"/bench/rt"))
        ftype, body = c.recv()
        self.assertEqual((ftype, body[:16], status_of(body)), (RESPONSE, tid, MALFORMED))  # still pending
        r.send(ret(tid, b"answer", b"a\0b\0"))
        self.assertEqual(c.recv(), (RESPONSE, tid + struct.pack("<H", OK) + pbytes(b"a\0b\0") + pbytes(b"answer")))
        r.send(ret(tid))                       # already answered: discarded
        self.assertTrue(c.silent())

    def test_send_errors(self):
        c = self.peer()
        c.send(send(struct.pack(">QII", time.time_ns(), c.node, c.iid + 7), b"/bench/rt"))
        self.assertEqual(status_of(c.recv()[1]), MALFORMED)        # not our instance_id
        tid = c.tid()
        c.send(send(tid, b"/bench/nobody"))
        ftype, body = c.recv()
        self.assertEqual((ftype, body[:16], status_of(body)), (RESPONSE, tid, NO_SERVICE))

    def test_window_fifo_and_crash(self):
        r, c = self.receiver(b"q", window=1), self.peer()
        tids = [c.tid() for _ in range(3)]
        c.send(b"".join(send(t, b"/bench/q", bytes([i])) for i, t in enumerate(tids)))
        for i, tid in enumerate(tids):
            self.assertEqual(r.recv()[1][:16], tid, "FIFO order")
            self.assertTrue(r.silent(), "window 1: nothing more until RETURN")
            r.send(ret(tid))
            self.assertEqual(c.recv()[1][:18], tid + struct.pack("<H", OK))
        tids = [c.tid() for _ in range(3)]
        c.send(b"".join(send(t, b"/bench/q") for t in tids))
        r.recv()
        r.close()                              # one delivered, two queued: all fail
        got = sorted(c.recv()[1][:18] for _ in range(3))
        self.assertEqual(got, sorted(t + struct.pack("<H", CRASHED) for t in tids))
        c.send(send(c.tid(), b"/bench/q"))
        self.assertEqual(status_of(c.recv()[1]), NO_SERVICE)       # its subscription left with it

    def test_round_robin(self):
        r1, r2, c = self.receiver(b"rr", 4), self.receiver(b"rr", 4), self.peer()
        c.send(b"".join(send(c.tid(), b"/bench/rr") for _ in range(4)))
        self.assertEqual([r1.recv()[0], r1.recv()[0], r2.recv()[0], r2.recv()[0]], [REQUEST] * 4)
        self.assertTrue(r1.silent(0.1) and r2.silent(0.1))

    def test_orphan_return_and_large_frames(self):
        r, c = self.receiver(b"big", 4), self.peer()
        gone = self.peer()
        tid = gone.tid()
        gone.send(send(tid, b"/bench/big"))
        r.recv()
        gone.close()
        time.sleep(0.1)
        r.send(ret(tid))                        # the sender left: dropped quietly
        big = os.urandom(2 << 20)               # larger than the relay's read buffer
        tid = c.tid()
        c.send(send(tid, b"/bench/big", big))
        self.assertTrue(r.recv()[1].endswith(pbytes(big)))
        r.send(ret(tid, big))
        self.assertTrue(c.recv()[1].endswith(pbytes(big)))


if __name__ == "__main__":
    unittest.main()
