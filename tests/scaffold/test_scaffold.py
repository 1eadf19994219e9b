"""`cumulo new <language> <name>` in every SDK language: each service is
written, built with the command `cumulo new` printed, and run under one
real core with the [[service]] lines it printed; then each answers its
name. Also: what `cumulo new` refuses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cumulo
import pytest

ROOT = Path(__file__).resolve().parents[2]
CUMULO_BIN = ROOT / "target" / "release" / "cumulo"
# Every SDK of the source tree: one without templates fails here.
LANGUAGES = sorted(p.name for p in (ROOT / "sdk").iterdir() if p.is_dir())
READY_S = 90  # a JVM and an Erlang VM among 14 runtimes on a busy 2-core machine
BUILD_TIMEOUT_S = 300

# Builds reuse what the test command has built already: the Rust service
# builds into the workspace's target/ with its release profile and its
# Cargo.lock (so the SDK's dependencies are not compiled again), and CMake
# builds on both cores.
BUILD_ENV = {
    "CARGO_TARGET_DIR": str(ROOT / "target"),
    "CARGO_PROFILE_RELEASE_DEBUG": "1",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "4",
    "CARGO_PROFILE_RELEASE_LTO": "thin",
    "CMAKE_BUILD_PARALLEL_LEVEL": "2",
}
# The slowest builds first, so that two at a time end together.
SLOWEST_FIRST = ["haskell", "rust", "cpp", "c", "ats2", "ocaml", "go", "java"]


def cumulo_new(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(CUMULO_BIN), "new", *args], capture_output=True, text=True, timeout=30,
                          check=False, env={**os.environ, **(env or {})})


def printed(output: str) -> tuple[str, str]:
    """The build command and the [[service]] lines `cumulo new` printed."""
    lines = output.splitlines()
    build = lines[lines.index("Build it:") + 1].strip()
    service = output[output.index("[[service]]"):]
    return build, service


class Service:
    def __init__(self, lang: str, root: Path) -> None:
        self.lang = lang
        self.name = f"t_{lang}"
        self.dir = root / self.name
        self.new = cumulo_new(lang, self.name, "--dir", str(self.dir), env=BUILD_ENV)
        assert self.new.returncode == 0, f"cumulo new {lang}: {self.new.stderr}"
        self.build_cmd, self.service = printed(self.new.stdout)
        self.build_log = ""
        self.build_s = 0.0
        self.built = False

    def build(self) -> None:
        if self.lang == "rust":
            shutil.copy(ROOT / "Cargo.lock", self.dir / "Cargo.lock")
        t0 = time.monotonic()
        done = subprocess.run(["bash", "-c", self.build_cmd], capture_output=True, text=True, check=False,
                              timeout=BUILD_TIMEOUT_S, env={**os.environ, **BUILD_ENV},
                              cwd=tempfile.gettempdir())
        self.build_s = time.monotonic() - t0
        self.build_log = done.stdout + done.stderr
        self.built = done.returncode == 0


@pytest.fixture(scope="module")
def services(tmp_path_factory) -> dict[str, Service]:
    root = tmp_path_factory.mktemp("new")
    made = {lang: Service(lang, root) for lang in LANGUAGES}
    order = sorted(made.values(), key=lambda s: SLOWEST_FIRST.index(s.lang) if s.lang in SLOWEST_FIRST else 99)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(Service.build, order))
    print("\nbuild seconds: " + ", ".join(f"{s.lang} {s.build_s:.0f}" for s in order))
    return made


@pytest.fixture(scope="module")
def core(services):
    """One core running every service that built, with the lines `cumulo new` printed."""
    tmp = Path(tempfile.mkdtemp(prefix="cumulo-new-", dir="/tmp"))  # a short socket path
    socket, config, log = tmp / "core.sock", tmp / "cumulo.toml", tmp / "core.log"
    blocks = [s.service for s in services.values() if s.built]
    config.write_text(f'[admin]\nport = 0\n\n[core]\nsocket = "{socket}"\n\n' + "\n".join(blocks))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULO_")}
    env["NO_COLOR"] = "1"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(CUMULO_BIN), "run", "--config", str(config)], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=tmp)
    deadline = time.monotonic() + 10
    while not socket.exists():
        assert proc.poll() is None and time.monotonic() < deadline, \
            f"the core did not start\n{log.read_text(errors='replace')}"
        time.sleep(0.05)
    yield socket, log, time.monotonic() + READY_S
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_new_service_builds_runs_and_answers(lang, services, core):
    svc = services[lang]
    assert svc.built, f"{svc.build_cmd}\n{svc.build_log[-3000:]}"
    socket, log, deadline = core
    name = f"/{svc.name}/{svc.name}/get"  # the default prefix is /<name>/
    with cumulo.API(address=str(socket), prefix="/client/") as api:
        left = max(1000, int((deadline - time.monotonic()) * 1000))
        try:
            info, body = api.send_sync(name, cumulo.info_encode([("value", "42")]), timeout=left,
                                       wait_for_service=True)
        except cumulo.CumuloError as e:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise AssertionError(f"{name}: {e.status.name} {e.message}\n{tail}") from e
        assert body == f"hello from {svc.name} (value 42)".encode()
        assert dict(cumulo.info_parse(info)).get(b"content-type", b"").startswith(b"text/plain")
        _, body = api.send_sync(name, b"")
        assert body == f"hello from {svc.name}".encode()
    readme = (svc.dir / "README.md").read_text()
    assert svc.build_cmd in readme and svc.service.strip() in readme


def test_an_unknown_language_is_refused_with_the_list(tmp_path):
    done = cumulo_new("cobol", "x", "--dir", str(tmp_path / "x"))
    assert done.returncode != 0
    assert "cobol" in done.stderr
    for lang in LANGUAGES:
        assert lang in done.stderr, f"{lang} not listed: {done.stderr}"
    assert not (tmp_path / "x").exists()


def test_a_folder_that_is_not_empty_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    done = cumulo_new("python", "hello", "--dir", str(tmp_path))
    assert done.returncode == 1
    assert "not an empty folder" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_empty_folder_is_used_and_the_options_are_written(tmp_path):
    done = cumulo_new("go", "orders", "--dir", str(tmp_path), "--prefix", "/shop/", "--sdk", str(ROOT / "sdk"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "go.mod", "main.go"]
    assert f"=> {(ROOT / 'sdk').resolve()}/go" in (tmp_path / "go.mod").read_text()
    _, service = printed(done.stdout)
    assert 'prefix = "/shop/"' in service and f'path = "{tmp_path}/orders"' in service


def test_a_bad_name_or_sdk_is_refused(tmp_path):
    done = cumulo_new("python", "Hello-World", "--dir", str(tmp_path / "a"))
    assert done.returncode == 1 and "invalid name" in done.stderr
    done = cumulo_new("python", "hello", "--dir", str(tmp_path / "b"), "--sdk", str(tmp_path))
    assert done.returncode == 1 and "--sdk" in done.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
