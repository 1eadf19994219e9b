"""Fixtures of the cross-language suite: the real core, the example services,
the faulty services and the client programs, built and started once per
module."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import cumulo
# PYTHON is re-exported for test_cloudi.py.
from sdks import BY_NAME, CLOUDI_HTTP_REQ, EXAMPLES, PYTHON, ROOT, SDKS, SERVICES, sdk_of_example  # noqa: F401

HERE = Path(__file__).resolve().parent
CUMULO_BIN = ROOT / "target" / "release" / "cumulo"
# core.threads of the cores the tests start: CUMULO_TEST_THREADS, else 1 (the
# test command runs the suites once with 1 and once with 2).
THREADS = int(os.environ.get("CUMULO_TEST_THREADS", "1"))

# Every http_req example of examples/cumulo.toml, named as it subscribes
# (<lang>.xml/get): each SDK's (sdks.py), then those written against CloudI's APIs.
LANGUAGES = [example for sdk in SDKS for example in sdk.http_req] + CLOUDI_HTTP_REQ
HTTP_REQ = "/tests/http_req/{}.xml/get"

# Every SDK has a client (clients/) and a faulty service (services/).
CLIENT_LANGUAGES = [sdk.name for sdk in SDKS]
FAULTY_LANGUAGES = [sdk.name for sdk in SDKS]
FAULTY = "/tests/faulty/{}/"

START_TIMEOUT_MS = 60_000  # a JVM on a busy 2-core machine is slow to start
STOP_TIMEOUT_S = 10
CLIENT_DEFAULT_TIMEOUT_MS = 20_000

# The answers of docs/SDK_GUIDE.md.
XML_INFO = b"content-type\x00text/xml; charset=utf-8\x00"
NO_VALUE = b"<http_test><error>no value specified</error></http_test>"


def value_xml(n: int | str) -> bytes:
    return b"<http_test><value>%s</value></http_test>" % str(n).encode()


# ---------------------------------------------------------------- building


@dataclass
class Built:
    """The folder the SDKs' client and faulty programs were compiled into,
    and how to run each (sdks.py)."""

    dir: Path

    def client_cmd(self, lang: str) -> list[str]:
        return [str(c) for c in BY_NAME[lang].client(self.dir)]

    def faulty_cmd(self, lang: str) -> list[str]:
        return [str(c) for c in BY_NAME[lang].faulty(self.dir)]


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Built:
    build = tmp_path_factory.mktemp("build")
    for sdk in SDKS:
        if sdk.build:
            sdk.build(build)
    return Built(build)


# ------------------------------------------------- the language x scenario table

# One cell of the summary table: (language, scenario) -> outcomes of its tests.
CELLS: dict[tuple[str, str], list[str]] = {}


def cell(language: str, scenario: str) -> pytest.MarkDecorator:
    """Marks a test (or a param) as one check of `scenario` for `language`;
    the end of the run prints a table of them (pytest_terminal_summary)."""
    return pytest.mark.cell(language, scenario)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "cell(language, scenario): a cell of the language x scenario table")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("cell")
    if marker is None:
        return
    # The call's outcome, and a failed or skipped setup or teardown (a core
    # that did not start fails every cell that needed it).
    if report.when == "call" or not report.passed:
        outcome = "xfail" if hasattr(report, "wasxfail") else report.outcome
        CELLS.setdefault((sdk_of_example(marker.args[0]), marker.args[1]), []).append(outcome)


def pytest_terminal_summary(terminalreporter) -> None:
    if not CELLS:
        return
    rows = [sdk.name for sdk in SDKS] + sorted({lang for lang, _ in CELLS} - set(BY_NAME))
    known = ["http_req", "service_error", "client_sync", "client_async", "client_error_element", "client_no_service",
             "client_unavailable", "client_service_error", "guide_functions"]
    columns = sorted({scenario for _, scenario in CELLS}, key=lambda c: (known.index(c) if c in known else len(known), c))
    mark = {"passed": "pass", "failed": "FAIL", "skipped": "skip", "xfail": "xfail"}

    def text(lang: str, scenario: str) -> str:
        outcomes = CELLS.get((lang, scenario))
        if not outcomes:
            return "-"
        for worst in ("failed", "xfail", "skipped"):
            if worst in outcomes:
                return mark[worst]
        return mark["passed"]

    width = [max(len(c), 5) for c in columns]
    first = max(len(r) for r in rows + ["language"])
    tr = terminalreporter
    tr.write_sep("=", "language x scenario (FAIL if any test of the cell failed; - not run)")
    tr.write_line("language".ljust(first) + "  " + "  ".join(c.ljust(w) for c, w in zip(columns, width)))
    for lang in rows:
        tr.write_line(lang.ljust(first) + "  " + "  ".join(text(lang, c).ljust(w) for c, w in zip(columns, width)))


# ---------------------------------------------------------------- the core


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def _absolute(entry: str) -> str:
    """A relative path naming a file of the examples, made absolute; anything
    else (a program found on PATH, a plain argument) unchanged."""
    if os.path.isabs(entry) or "/" not in entry:
        return entry
    path = os.path.normpath(EXAMPLES / entry)  # not resolve(): keeps the venv's python symlink
    return path if os.path.exists(path) else entry


def example_services() -> list[dict]:
    with open(EXAMPLES / "cumulo.toml", "rb") as f:
        cfg = tomllib.load(f)
    services = []
    for svc in cfg.get("service", []):
        svc = dict(svc)
        if svc.get("internal") == "http":
            continue  # the gateway has its own suite; its fixed port could be taken here
        if "path" in svc:
            svc["path"] = _absolute(svc["path"])
            svc["args"] = [_absolute(a) for a in svc.get("args", [])]
            svc["dir"] = str(EXAMPLES)
            # About 34 processes of 15 runtimes (JVMs, Erlang VMs, ...) start at
            # once on a 2-core machine: these tests are about starting and
            # stopping, not about how fast, so a slow start is not a restart.
            svc.setdefault("timeout_init", 30_000)
        services.append(svc)
    return services


def faulty_services(b: Built) -> list[dict]:
    services = []
    for lang in FAULTY_LANGUAGES:
        program, *args = b.faulty_cmd(lang)
        # One instance only: the one that failed must be the one that answers /ok.
        services.append({"prefix": FAULTY.format(lang), "path": program, "args": args, "dir": str(SERVICES),
                         "count_process": 1, "count_thread": 1, "timeout_init": 30_000})
    return services


GIVEN_UP = "/tests/given_up/"


def given_up_services() -> list[dict]:
    """A service whose program exits at once and that may not restart
    (max_r = 0): given up, its names are UNAVAILABLE for every caller."""
    return [{"prefix": GIVEN_UP, "path": "false", "max_r": 0}]


def write_config(path: Path, socket: Path, services: list[dict], admin_port: int = 0,
                 core_keys: dict | None = None, sections: str = "") -> None:
    """`sections`: more of the file, as TOML text (`[tracing]`, `[cluster]`)."""
    # Clients send with the default timeouts: generous ones, for a loaded machine.
    extra = [f"{k} = {_toml(v)}" for k, v in (core_keys or {}).items()]
    lines = ["[admin]", f"port = {admin_port}", "", "[core]", f"socket = {_toml(str(socket))}",
             f"threads = {THREADS}", *extra, "", "[core.unmanaged]",
             f"timeout_sync = {CLIENT_DEFAULT_TIMEOUT_MS}", f"timeout_async = {CLIENT_DEFAULT_TIMEOUT_MS}", ""]
    for svc in services:
        lines.append("[[service]]")
        lines += [f"{k} = {_toml(v)}" for k, v in svc.items()]
        lines.append("")
    path.write_text("\n".join(lines) + "\n" + sections)


def processes_of(socket: Path) -> list[int]:
    """Live processes the core started for this socket (its CUMULO_SOCKET is
    in their environment), children of services included."""
    needle = b"CUMULO_SOCKET=" + str(socket).encode() + b"\x00"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read():
                    found.append(int(entry))
        except OSError:  # gone, or not ours
            pass
    return found


STARTED = re.compile(r"process \d+ started \(pid (\d+)\) service=(\S+)")
INITIALIZED = re.compile(r"process \d+ initialized service=(\S+)")


@dataclass
class Core:
    """A running `cumulo run` with its own config, socket and log."""

    dir: Path
    socket: Path
    config: Path
    log: Path
    proc: subprocess.Popen
    services: list[dict] = field(default_factory=list)
    exit_code: int | None = None
    stop_seconds: float | None = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def started(self) -> list[tuple[int, str]]:
        """(pid, service prefix) of every process start the core logged."""
        return [(int(m[1]), m[2]) for m in STARTED.finditer(self.log_text())]

    def api(self, prefix: str = "/tests/polyglot/driver/") -> cumulo.API:
        try:
            return cumulo.API(address=str(self.socket), prefix=prefix)
        except OSError as e:  # say why: the fixtures remove the core's folder
            raise AssertionError(f"cannot connect to the core: {e}; its exit code: {self.proc.poll()}\n"
                                 f"{self.log_tail()}") from e

    def wait_ready(self, names: list[str]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_MS / 1000
        with self.api() as api:
            for name in names:
                left = int((deadline - time.monotonic()) * 1000)
                assert left > 0, f"{name} not served within {START_TIMEOUT_MS} ms\n{self.log_tail()}"
                try:
                    api.send_sync(name, b"value\x001\x00", timeout=left, wait_for_service=True)
                except cumulo.CumuloError as e:
                    if e.status != cumulo.Status.SERVICE_ERROR:  # a faulty /boom is ready too
                        raise AssertionError(f"{name}: {e.status.name} {e.message}\n{self.log_tail()}") from e
        # One answering instance per service is not all of them: wait until
        # every process has connected all its threads, so that no process is
        # still starting when the core is stopped.
        # (The given-up service never initializes.)
        expected = sum(svc.get("count_process", 1) for svc in self.services
                       if "path" in svc and svc.get("prefix") != GIVEN_UP)
        while len(INITIALIZED.findall(self.log_text())) < expected:
            assert time.monotonic() < deadline, f"not every process initialized\n{self.log_tail()}"
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM; waits for the exit (killing the core if it hangs)."""
        if self.exit_code is not None:
            return
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait()
            self.stop_seconds = float("inf")
            return
        self.stop_seconds = time.monotonic() - t0

    def assert_stopped_cleanly(self) -> None:
        self.stop()
        assert self.stop_seconds is not None and self.stop_seconds <= STOP_TIMEOUT_S, \
            f"the core did not exit within {STOP_TIMEOUT_S} s of SIGTERM\n{self.log_tail()}"
        assert self.exit_code == 0, f"the core exited with {self.exit_code}\n{self.log_tail()}"
        # A service's own children (a shell's java, say) may outlive it by a
        # moment: give them that before declaring them left behind.
        deadline = time.monotonic() + 3
        while (left := processes_of(self.socket)) and time.monotonic() < deadline:
            time.sleep(0.1)
        details = {pid: _cmdline(pid) for pid in left}
        assert not left, f"service processes left behind: {details}"
        for pid, prefix in self.started():
            assert not _alive_for(pid, self.socket), f"{prefix} process {pid} still running"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace")
    except OSError:
        return "?"


def _alive_for(pid: int, socket: Path) -> bool:
    return pid in processes_of(socket) if Path(f"/proc/{pid}").exists() else False


def start_core(services: list[dict], admin_port: int = 0, core_keys: dict | None = None, sections: str = "",
               dir: Path | None = None) -> Core:
    """`core_keys`: more keys of [core] (a TCP listener, say); `sections`:
    more of the config file; `dir`: the folder of a core started again."""
    # Short: a Unix socket path must fit in 108 bytes.
    tmp = dir or Path(tempfile.mkdtemp(prefix="cumulo-poly-", dir="/tmp"))
    socket, config, log = tmp / "core.sock", tmp / "cumulo.toml", tmp / "core.log"
    write_config(config, socket, services, admin_port, core_keys, sections)
    socket.unlink(missing_ok=True)  # a killed core's, when started again: not a sign of this one
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULO_")}
    # The supervisor's debug lines say when each process is initialized.
    env.update(NO_COLOR="1", CUMULO_LOG="info,cumulo_node::supervisor=debug")
    with open(log, "ab") as out:
        proc = subprocess.Popen([str(CUMULO_BIN), "run", "--config", str(config)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp)
    core = Core(tmp, socket, config, log, proc, services)
    deadline = time.monotonic() + 10
    while not socket.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            core.stop()
            raise AssertionError(f"the core did not open its socket\n{core.log_tail()}")
        time.sleep(0.05)
    return core


def http_req_names() -> list[str]:
    return [HTTP_REQ.format(l) for l in LANGUAGES]


def all_names() -> list[str]:
    return http_req_names() + [FAULTY.format(l) + "ok" for l in FAULTY_LANGUAGES]


@pytest.fixture(scope="module")
def core(built) -> Core:
    """The core with every http_req example, every faulty service and a
    given-up one, ready."""
    c = start_core(example_services() + faulty_services(built) + given_up_services())
    try:
        c.wait_ready(all_names())
    except BaseException:
        c.stop()
        shutil.rmtree(c.dir, ignore_errors=True)
        raise
    yield c
    c.assert_stopped_cleanly()
    shutil.rmtree(c.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def api(core):
    with core.api() as a:
        yield a
