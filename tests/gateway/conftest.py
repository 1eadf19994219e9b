"""End-to-end fixtures: the real `cumulo` binary with HTTP gateways in front
of the Rust http_req example, the internal echo service and a Python probe
service. Build: `cargo build --release --workspace` (done here)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

from gateway_client import request

ROOT = Path(__file__).resolve().parents[2]
CUMULO = ROOT / "target" / "release" / "cumulo"
HTTP_REQ = ROOT / "target" / "release" / "http_req"
PROBE = Path(__file__).resolve().parent / "services" / "probe.py"

# The main gateway's limits, short so that the tests stay fast.
TIMEOUT_MS = 1000
# core.threads of the cores the tests start: CUMULO_TEST_THREADS, else 1 (the
# test command runs the suites once with 1 and once with 2).
THREADS = int(os.environ.get("CUMULO_TEST_THREADS", "1"))
HEADER_TIMEOUT_MS = 1000
BODY_TIMEOUT_MS = 1000
MAX_BODY = 64 * 1024
MAX_HEADER_SIZE = 128 * 1024  # room for a path longer than a service name may be
SMALL_MAX_CONNECTIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def built() -> None:
    subprocess.run(
        # The whole workspace, as scripts/setup.sh builds it: `-p` would
        # resolve other dependency features and rebuild the core.
        ["cargo", "build", "--release", "--quiet", "--workspace"]
        + (["--all-targets"] if os.environ.get("CUMULO_ALL_TARGETS") else []),
        cwd=ROOT,
        check=True,
    )


class Core:
    """A running `cumulo run` with its log in a file."""

    def __init__(self, config: str, workdir: Path, env: Optional[dict] = None) -> None:
        self.workdir = workdir
        self.config_path = workdir / "cumulo.toml"
        self.config_path.write_text(config)
        self.log_path = workdir / "core.log"
        self._log = open(self.log_path, "wb")
        full_env = {k: v for k, v in os.environ.items() if k != "CUMULO_LOG"}
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(CUMULO), "run", "--config", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_served(
        self, port: int, paths: List[str], deadline_s: float = 20.0, method: str = "GET", body: Optional[bytes] = None
    ) -> None:
        """Waits until every path answers with something other than 404
        (the gateway listens and a service subscribes the name)."""
        end = time.monotonic() + deadline_s
        for path in paths:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError("cumulo exited early:\n" + self.log())
                try:
                    if request(port, method, path, body=body, timeout=2).status != 404:
                        break
                except OSError:
                    pass
                if time.monotonic() > end:
                    raise TimeoutError("%s not served on port %d:\n%s" % (path, port, self.log()))
                time.sleep(0.05)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def python_service(prefix: str, extra: str = "") -> str:
    return f"""
[[service]]
prefix = "{prefix}"
path = "{sys.executable}"
args = ["{PROBE}"]
env = {{ PYTHONUNBUFFERED = "1", CUMULO_PURE_PYTHON = "1" }}
{extra}
"""


class Cloud:
    def __init__(self, core: Core, port: int, small_port: int, access_log: Path) -> None:
        self.core = core
        self.port = port
        self.small_port = small_port
        self.access_log = access_log


@pytest.fixture(scope="session")
def cloud(built: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    work = tmp_path_factory.mktemp("cloud")
    port, small_port = free_port(), free_port()
    access_log = work / "access.log"
    config = f"""
[core]
socket = "{work}/cumulo.sock"
threads = {THREADS}

# The gateway under test.
[[service]]
prefix = "/"
internal = "http"
[service.settings]
port = {port}
timeout_ms = {TIMEOUT_MS}
header_timeout_ms = {HEADER_TIMEOUT_MS}
body_timeout_ms = {BODY_TIMEOUT_MS}
max_body = {MAX_BODY}
max_header_size = {MAX_HEADER_SIZE}

# A second gateway with every other setting changed, in front of echo.
[[service]]
prefix = "/small/"
internal = "http"
[service.settings]
port = {small_port}
max_connections = {SMALL_MAX_CONNECTIONS}
method_suffix = false
name_prefix = "/echo"
query_format = "raw"
headers = ["x-keep"]
access_log = "{access_log}"
keepalive = false

[[service]]
prefix = "/echo/"
internal = "echo"

[[service]]
prefix = "/tests/http_req/"
path = "{HTTP_REQ}"
count_process = 2

{python_service("/probe/")}
{python_service("/timeout/")}
{python_service("/crashy/")}
{python_service("/slow/", "queue_limit = 1")}
"""
    core = Core(config, work)
    try:
        core.wait_served(port, ["/tests/http_req/rust.xml?value=1", "/echo/ready"])
        for prefix in ("probe", "timeout", "crashy", "slow"):
            core.wait_served(port, ["/%s/sleep?ms=0" % prefix])
        core.wait_served(small_port, ["/ready"])
        yield Cloud(core, port, small_port, access_log)
    finally:
        core.stop()
