"""TLS to the core's TCP listener from the SDKs that speak it: each client
program (clients/) connects to `tcp://127.0.0.1:PORT` with `CUMULO_TLS_CA`
(and, for a core that asks for client certificates, `CUMULO_TLS_CERT` and
`CUMULO_TLS_KEY`) and calls a service through the real core. Certificates are
made fresh by tests/tls/make_certs.sh with the openssl CLI.

A client that trusts another CA, or that has no certificate where one is
required, must fail to connect: no answer, a non-zero exit, and the core
counts the failed handshake."""

from __future__ import annotations

import os
import re
import shutil
import socket as sockets
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import HTTP_REQ, XML_INFO, Core, cell, example_services, start_core, value_xml
from sdks import ROOT

# The SDKs that connect over TLS (docs/SDK_GUIDE.md, Connecting; C++ and ATS2
# through the C library); the others
# say in their README that they use the Unix socket.
TLS_LANGUAGES = ["c", "cpp", "ats2", "python", "go", "java", "javascript", "rust"]
SERVICE = HTTP_REQ.format("python")
CLIENT_TIMEOUT_S = 60


def _free_port() -> int:
    with sockets.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(ROOT / "tests" / "tls" / "make_certs.sh"), str(out)], check=True, capture_output=True)
    return out


def _python_service() -> list[dict]:
    svc = [s for s in example_services() if "http_req/python/http_req.py" in " ".join(s.get("args", []))]
    assert svc, "the pure-Python http_req example is not in examples/cumulo.toml"
    return [{**svc[0], "count_process": 1, "count_thread": 1}]


def _tls_core(certs: Path, client_ca: bool) -> tuple[Core, int, int]:
    port, admin = _free_port(), _free_port()
    keys = {"tcp": f"127.0.0.1:{port}", "tcp_tls_cert": str(certs / "server.pem"),
            "tcp_tls_key": str(certs / "server.key"), "tcp_anonymous": "outside_services"}
    if client_ca:
        keys["tcp_tls_client_ca"] = str(certs / "ca.pem")
    core = start_core(_python_service(), admin_port=admin, core_keys=keys)
    try:
        core.wait_ready([SERVICE])
    except BaseException:
        core.stop()
        raise
    return core, port, admin


def _running(certs: Path, client_ca: bool):
    core, port, admin = _tls_core(certs, client_ca)
    yield core, port, admin
    core.assert_stopped_cleanly()
    shutil.rmtree(core.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_core(certs):
    yield from _running(certs, client_ca=False)


@pytest.fixture(scope="module")
def mtls_core(certs):
    yield from _running(certs, client_ca=True)


def _client(built, lang: str, port: int, n: int, tls_env: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULO_")}
    env.update(tls_env)
    cmd = built.client_cmd(lang) + [f"tcp://127.0.0.1:{port}", SERVICE, (b"value\x00%d\x00" % n).hex(), "sync"]
    return subprocess.run(cmd, capture_output=True, env=env, timeout=CLIENT_TIMEOUT_S)


def _handshake_failures(admin: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10).read().decode()
    m = re.search(r"^cumulo_tcp_tls_handshake_failures_total (\d+)$", text, re.M)
    assert m, "no cumulo_tcp_tls_handshake_failures_total in /metrics"
    return int(m[1])


def _expect_answer(r: subprocess.CompletedProcess, n: int) -> None:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout!r}\nstderr: {r.stderr.decode(errors='replace')}"
    assert r.stdout == XML_INFO.hex().encode() + b"\n" + value_xml(n)


def _expect_refused(r: subprocess.CompletedProcess) -> None:
    assert r.returncode != 0, f"connected although it should not have: {r.stdout!r}"
    assert value_xml(0)[:20] not in r.stdout


@pytest.mark.parametrize("lang", [pytest.param(l, marks=cell(l, "tls")) for l in TLS_LANGUAGES])
def test_a_client_trusting_the_cores_ca_is_answered_over_tls(built, certs, tls_core, lang):
    _, port, _ = tls_core
    n = 7000 + TLS_LANGUAGES.index(lang)
    _expect_answer(_client(built, lang, port, n, {"CUMULO_TLS_CA": str(certs / "ca.pem")}), n)


@pytest.mark.parametrize("lang", [pytest.param(l, marks=cell(l, "tls_wrong_ca")) for l in TLS_LANGUAGES])
def test_a_client_trusting_another_ca_does_not_connect(built, certs, tls_core, lang):
    _, port, admin = tls_core
    before = _handshake_failures(admin)
    _expect_refused(_client(built, lang, port, 1, {"CUMULO_TLS_CA": str(certs / "other-ca.pem")}))
    assert _handshake_failures(admin) > before


@pytest.mark.parametrize("lang", [pytest.param(l, marks=cell(l, "mtls")) for l in TLS_LANGUAGES])
def test_a_client_with_a_certificate_is_answered_where_one_is_required(built, certs, mtls_core, lang):
    _, port, _ = mtls_core
    n = 7100 + TLS_LANGUAGES.index(lang)
    env = {"CUMULO_TLS_CA": str(certs / "ca.pem"), "CUMULO_TLS_CERT": str(certs / "client.pem"),
           "CUMULO_TLS_KEY": str(certs / "client.key")}
    _expect_answer(_client(built, lang, port, n, env), n)


@pytest.mark.parametrize("lang", [pytest.param(l, marks=cell(l, "mtls_no_cert")) for l in TLS_LANGUAGES])
def test_a_client_without_a_certificate_does_not_connect_where_one_is_required(built, certs, mtls_core, lang):
    _, port, admin = mtls_core
    before = _handshake_failures(admin)
    _expect_refused(_client(built, lang, port, 1, {"CUMULO_TLS_CA": str(certs / "ca.pem")}))
    # TLS 1.3 sends the server's refusal of a missing certificate after the
    # client's handshake has finished: the core counts it either way.
    assert _handshake_failures(admin) > before
