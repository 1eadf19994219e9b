"""Cross-language calls: a client program in each SDK language sends to
services written in other languages, through the real core."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import (CLIENT_LANGUAGES, FAULTY, FAULTY_LANGUAGES, GIVEN_UP, HTTP_REQ, LANGUAGES, NO_VALUE, XML_INFO,
                      cell, value_xml)

CLIENT_TIMEOUT_S = 60


def _others(langs: list[str], lang: str, n: int) -> list[str]:
    """The n languages after lang in langs (wrapping), never lang itself:
    each service gets clients from several other languages."""
    start = langs.index(lang) if lang in langs else 0
    ring = langs[start + 1:] + langs[:start + 1]
    return [l for l in ring if l != lang][:n]


def _cases() -> list[tuple]:
    """(client, case id, args, expected exit code, expected stdout)."""
    cases = []
    for i, client in enumerate(CLIENT_LANGUAGES):
        for j, target in enumerate(_others(LANGUAGES, client, 3)):
            n = 1000 * (i + 1) + j  # distinct per call: an answer cannot come from another call
            cases.append((client, f"sync-{target}", [HTTP_REQ.format(target), b"value\x00%d\x00" % n, "sync"],
                          0, XML_INFO.hex().encode() + b"\n" + value_xml(n)))
        error_target = _others(LANGUAGES, client, 4)[-1]
        cases.append((client, f"error-element-{error_target}", [HTTP_REQ.format(error_target), b"value\x00abc\x00", "sync"],
                      0, XML_INFO.hex().encode() + b"\n" + NO_VALUE))
        async_target = _others(LANGUAGES, client, 5)[-1]
        n = 1000 * (i + 1) + 99
        cases.append((client, f"async-{async_target}", [HTTP_REQ.format(async_target), b"value\x00-%d\x00" % n, "async"],
                      0, XML_INFO.hex().encode() + b"\n" + value_xml(-n)))
        cases.append((client, "no-service", ["/tests/http_req/nobody.xml/get", b"", "sync"], 3, None))
        cases.append((client, "unavailable", [GIVEN_UP + "x", b"", "sync"], 3, None))
        faulty = _others(FAULTY_LANGUAGES, client, 1)[0]
        cases.append((client, f"service-error-{faulty}", [FAULTY.format(faulty) + "boom", b"", "sync"], 3, None))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def results(core, built):
    """Runs every client invocation, two at a time, before the first test
    looks at its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULO_")}

    def run(case):
        client, _, (name, body, mode), _, _ = case
        cmd = built.client_cmd(client) + [str(core.socket), name, body.hex(), mode]
        try:
            return subprocess.run(cmd, capture_output=True, timeout=CLIENT_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            return e

    with ThreadPoolExecutor(2) as pool:
        return dict(zip([(c[0], c[1]) for c in CASES], pool.map(run, CASES)))


def _scenario(case: str) -> str:
    """The table column of a case: client_sync, client_async, ..."""
    for kind in ("sync", "async", "error-element", "no-service", "unavailable", "service-error"):
        if case == kind or case.startswith(kind + "-"):
            return "client_" + kind.replace("-", "_")
    raise ValueError(case)


@pytest.mark.parametrize("client,case,args,exit_code,stdout",
                         [pytest.param(*c, id=f"{c[0]}-{c[1]}", marks=cell(c[0], _scenario(c[1]))) for c in CASES])
def test_client(results, client, case, args, exit_code, stdout):
    r = results[(client, case)]
    assert not isinstance(r, subprocess.TimeoutExpired), f"no exit within {CLIENT_TIMEOUT_S} s"
    why = f"exit {r.returncode}\nstdout: {r.stdout!r}\nstderr: {r.stderr.decode(errors='replace')[-2000:]}"
    assert r.returncode == exit_code, why
    if case == "no-service":
        status, _, message = r.stdout.partition(b"\n")
        assert status == b"NO_SERVICE" and message, why
    elif case == "unavailable":
        # A configured service given up: every SDK names the status 13.
        status, _, message = r.stdout.partition(b"\n")
        assert status == b"UNAVAILABLE" and b"given up" in message, why
    elif case.startswith("service-error-"):
        status, _, message = r.stdout.partition(b"\n")
        assert status == b"SERVICE_ERROR" and message, why
    else:
        assert r.stdout == stdout, why
