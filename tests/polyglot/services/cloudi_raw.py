#!/usr/bin/env python3
"""A CloudI-protocol peer that misbehaves on purpose, without CloudI's API:
takes descriptor 3 as the core hands it, says ``init`` properly (an Erlang
term), then writes what RAW_MODE asks for, and reports on stdout whether the
core closed the socket."""

import os
import socket
import struct
import time

INIT = bytes([131, 115, 4]) + b"init"  # the atom init, as erlang_py writes it
PAYLOADS = {
    "garbage": b"\xde\xad\xbe\xef not a term",
    "wrong_tuple": bytes([131, 104, 2, 115, 9]) + b"subscribe" + bytes([97, 42]),  # {subscribe, 42}
    "huge_length": None,
}

s = socket.socket(fileno=3)
s.sendall(struct.pack(">I", len(INIT)) + INIT)
(length,) = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))
init = s.recv(length, socket.MSG_WAITALL)
print("got init: command %d" % struct.unpack("=I", init[:4])[0], flush=True)
mode = os.environ["RAW_MODE"]
if PAYLOADS[mode] is None:
    s.sendall(struct.pack(">I", 0xFFFFFFF0) + b"x" * 16)
else:
    s.sendall(struct.pack(">I", len(PAYLOADS[mode])) + PAYLOADS[mode])
s.settimeout(10)
try:
    closed = s.recv(4) == b""
except OSError:
    closed = True
print("closed by the core" if closed else "still open", flush=True)
# Stay up: the test checks the core, not a restart loop.
time.sleep(3600)
