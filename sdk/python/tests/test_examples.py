"""The http_req examples, run as real processes against the fake core."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import pytest
from conftest import C_CODEC
from fakecore import FakeCore, request, tid

from cumulo import info_encode
from cumulo import messages as m

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "http_req"
XML_INFO = info_encode({"content-type": "text/xml; charset=utf-8"})
NO_VALUE = b"<http_test><error>no value specified</error></http_test>"

CASES: List[Tuple[bytes, Optional[str]]] = [
    (b"value\x0042\x00", "42"),
    (b"value\x00+007\x00", "7"),
    (b"value\x00-3\x00", "-3"),
    (b"value\x00-0\x00", "0"),
    (b"other\x001\x00value\x009223372036854775807\x00", "9223372036854775807"),
    (b"value\x00-9223372036854775808\x00", "-9223372036854775808"),
    (b"value\x009223372036854775808\x00", None),  # over 64 bits
    (b"value\x00abc\x00", None),
    (b"value\x00\x00", None),
    (b"value\x00+\x00", None),
    (b"value\x00 42\x00", None),
    (b"value\x004_2\x00", None),
    (b"value\x00\xd9\xa3\x00", None),  # a non-ASCII digit
    (b"other\x0042\x00", None),
    (b"", None),
    (b"value\x0042", None),  # malformed key/value bytes
]


def expected(answer: Optional[str]) -> bytes:
    if answer is None:
        return NO_VALUE
    return b"<http_test><value>%s</value></http_test>" % answer.encode()


def start(example: str, address: str, extra_env: Optional[dict] = None) -> "subprocess.Popen[bytes]":
    env = dict(os.environ, CUMULO_SOCKET=address, CUMULO_TOKEN="t0ken", CUMULO_THREAD_COUNT="2",
               CUMULO_PROCESS_INDEX="0", CUMULO_PROCESS_COUNT="1", CUMULO_PREFIX="/tests/http_req/")
    env.update(extra_env or {})
    return subprocess.Popen([sys.executable, str(EXAMPLES / example / "http_req.py")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("example", [
    "python",
    pytest.param("python_c", marks=pytest.mark.skipif(C_CODEC is None, reason="cumulo._ccodec is not built")),
])
def test_http_req_example(example: str) -> None:
    prefix = "/tests/http_req/"
    thread_indexes: List[int] = []

    def script(core: FakeCore) -> None:
        conns = []
        for _ in range(2):
            conn, hello = core.handshake(prefix=prefix, thread_count=2)
            assert hello.token == "t0ken"
            thread_indexes.append(hello.thread_index)
            sub = conn.expect(m.Subscribe)
            assert sub.pattern == "%s.xml/get" % example
            conn.send(m.Reply(sub.req_id, 0, 0, ""))
            conns.append(conn)
        pattern = prefix + sub.pattern
        for n, (body, answer) in enumerate(CASES):
            conn = conns[n % 2]
            conn.send(request(tid(n), pattern, body))
            assert conn.expect(m.Return) == m.Return(tid(n), 0, XML_INFO, expected(answer)), body
        for conn in conns:
            conn.send(m.Terminate(1000))
            conn.expect(m.Goodbye)

    core = FakeCore(script)
    # As bench/http_req_matrix runs them: python in pure Python, python_c on the C extension.
    process = start(example, core.address, {"CUMULO_PURE_PYTHON": "1" if example == "python" else ""})
    try:
        core.join(timeout=20)
        assert process.wait(timeout=10) == 0, process.stderr.read() if process.stderr else ""
    finally:
        process.kill()
        process.communicate()
    assert sorted(thread_indexes) == [0, 1]


def test_python_c_example_requires_the_extension() -> None:
    process = start("python_c", "/nonexistent.sock", {"CUMULO_PURE_PYTHON": "1"})
    _, stderr = process.communicate(timeout=20)
    assert process.returncode != 0
    assert b"C codec" in stderr and b"not available" in stderr
