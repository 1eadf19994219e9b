"""TLS to the core's TCP listener, against a fake core that speaks TLS.

Certificates come from tests/tls/make_certs.sh (the openssl CLI). Every
test that connects runs once per codec implementation (fixture
``use_impl``): with TLS, poll runs the Python loop whatever the codec.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest
from fakecore import FakeCore, request, tid

from cumulo import API, ConnectionClosed
from cumulo import messages as m

MAKE_CERTS = Path(__file__).resolve().parents[3] / "tests" / "tls" / "make_certs.sh"
GET = "/tests/a/get"
TLS_VARS = ("CUMULO_TLS_CA", "CUMULO_TLS_CERT", "CUMULO_TLS_KEY")
# A server certificate from the same CA for another name: elsewhere.pem, elsewhere.key.
ELSEWHERE = r"""openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out elsewhere.key 2>/dev/null
openssl req -new -key elsewhere.key -subj /CN=elsewhere.example -out elsewhere.csr
printf "subjectAltName=DNS:elsewhere.example\nextendedKeyUsage=serverAuth\n" >elsewhere.ext
openssl x509 -req -in elsewhere.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile elsewhere.ext -out elsewhere.pem 2>/dev/null"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is needed to make the test certificates")
    out = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(MAKE_CERTS), str(out)], check=True, capture_output=True)
    subprocess.run(["bash", "-euc", ELSEWHERE], cwd=out, check=True, capture_output=True)
    return out


@pytest.fixture(autouse=True)
def no_tls_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TLS_VARS:
        monkeypatch.delenv(name, raising=False)


def server_context(certs: Path, client_ca: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=certs / "ca.pem")
    return context


def serve_one(core: FakeCore) -> None:
    """The handshake, a subscription, one request served, a PING, then a SEND_SYNC answered."""
    conn, _ = core.handshake()
    sub = conn.expect(m.Subscribe)
    conn.send(m.Reply(sub.req_id, 0, 0, ""))
    body = bytes(range(256)) * 4096  # 1 MiB: many TLS records
    conn.send(request(tid(1), GET, body), m.Ping(9))
    ret = conn.expect(m.Return)
    assert (ret.trans_id, ret.response) == (tid(1), b"got %d" % len(body))
    assert conn.expect(m.Pong) == m.Pong(9)
    send = conn.expect(m.SendSync)
    conn.send(m.Response(send.trans_id, 0, b"", b"over tls"))
    conn.expect(m.Goodbye)


def exercise(api: API) -> None:
    served: List[int] = []

    def handler(api: API, req: m.Request) -> bytes:
        served.append(len(req.request))
        return b"got %d" % len(req.request)

    api.subscribe("a/get", handler)
    assert api.poll(0) is True  # non-blocking reads, whole records or not
    for _ in range(50):
        if served:
            break
        api.poll(100)
    assert served == [1 << 20]
    assert api.send_sync("/x", b"") == (b"", b"over tls")


@pytest.mark.usefixtures("use_impl")
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_tls_from_the_environment(certs: Path, monkeypatch: pytest.MonkeyPatch, host: str) -> None:
    core = FakeCore(serve_one, tls=server_context(certs))
    monkeypatch.setenv("CUMULO_TLS_CA", str(certs / "ca.pem"))
    with API(address=core.address.replace("127.0.0.1", host), prefix="/tests/") as api:
        assert isinstance(api._sock, ssl.SSLSocket)
        exercise(api)
    core.join()


@pytest.mark.usefixtures("use_impl")
def test_client_certificate(certs: Path) -> None:
    peer: List[Dict[str, Any]] = []

    def script(core: FakeCore) -> None:
        serve_one(core)
        cert = core.conns[0].sock.getpeercert()  # type: ignore[attr-defined]
        peer.append(cert)

    core = FakeCore(script, tls=server_context(certs, client_ca=True))
    with API(address=core.address, prefix="/tests/", tls_ca=str(certs / "ca.pem"),
             tls_cert=str(certs / "client.pem"), tls_key=str(certs / "client.key")) as api:
        exercise(api)
    core.join()
    assert ((("commonName", "cumulo test instance"),),) == peer[0]["subject"]


@pytest.mark.usefixtures("use_impl")
def test_explicit_options_win_over_the_environment(certs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def script(core: FakeCore) -> None:
        core.handshake()
        core.conns[0].expect(m.Goodbye)

    core = FakeCore(script, tls=server_context(certs))
    monkeypatch.setenv("CUMULO_TLS_CA", str(certs / "other-ca.pem"))
    monkeypatch.setenv("CUMULO_TLS_CERT", str(certs / "client.pem"))  # no key: explicit "" turns it off
    with API(address=core.address, prefix="/tests/", tls_ca=str(certs / "ca.pem"), tls_cert="") as api:
        assert api.poll(0) is True  # a non-blocking read of nothing: no record at all
    core.join()


def test_an_unknown_ca_fails_the_connect(certs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failures: List[BaseException] = []

    def script(core: FakeCore) -> None:
        try:
            core.accept()
        except ssl.SSLError as exc:
            failures.append(exc)

    core = FakeCore(script, tls=server_context(certs))
    monkeypatch.setenv("CUMULO_TLS_CA", str(certs / "other-ca.pem"))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        API(address=core.address, prefix="/tests/")
    core.join()
    assert failures


def test_a_name_the_certificate_does_not_carry_fails_the_connect(certs: Path) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "elsewhere.pem", certs / "elsewhere.key")

    def script(core: FakeCore) -> None:
        try:
            core.accept()
        except ssl.SSLError:
            pass

    core = FakeCore(script, tls=context)
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        API(address=core.address, prefix="/tests/", tls_ca=str(certs / "ca.pem"))
    core.join()


@pytest.mark.usefixtures("use_impl")
def test_no_certificate_where_one_is_required(certs: Path) -> None:
    def script(core: FakeCore) -> None:
        try:
            core.accept()
        except ssl.SSLError:
            pass

    core = FakeCore(script, tls=server_context(certs, client_ca=True))
    # TLS 1.3: the refusal may come after the client's side of the handshake, on the first read.
    with pytest.raises((ssl.SSLError, ConnectionClosed)):
        API(address=core.address, prefix="/tests/", tls_ca=str(certs / "ca.pem"))
    core.join()


@pytest.mark.parametrize("given", ["CUMULO_TLS_CERT", "CUMULO_TLS_KEY"])
def test_a_certificate_without_its_key_is_refused(certs: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv("CUMULO_TLS_CA", str(certs / "ca.pem"))
    monkeypatch.setenv(given, str(certs / ("client.pem" if given.endswith("CERT") else "client.key")))
    with pytest.raises(ValueError, match="needs both"):  # before any connection: the port is unused
        API(address="tcp://127.0.0.1:1", prefix="/tests/")


def test_a_missing_ca_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(ValueError, match="TLS CA file .*nowhere.pem.*No such file"):
        API(address="tcp://127.0.0.1:1", prefix="/tests/", tls_ca=str(missing))


def test_a_ca_file_that_is_not_a_certificate_is_a_clear_error(certs: Path) -> None:
    with pytest.raises(ValueError, match="TLS CA file"):
        API(address="tcp://127.0.0.1:1", prefix="/tests/", tls_ca=str(certs / "ca.key"))


@pytest.mark.usefixtures("use_impl")
def test_a_unix_socket_ignores_the_tls_settings(certs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def script(core: FakeCore) -> None:
        core.handshake()
        core.conns[0].expect(m.Goodbye)

    core = FakeCore(script)
    monkeypatch.setenv("CUMULO_TLS_CA", str(certs / "other-ca.pem"))
    monkeypatch.setenv("CUMULO_TLS_CERT", str(certs / "client.pem"))
    with API(address=core.address, prefix="/tests/") as api:
        assert not isinstance(api._sock, ssl.SSLSocket)
    core.join()
