"""docs/GUIDE.md, run as written: its listings (the users service in Python,
JavaScript and Go, the service tables, cumulo.toml) are extracted into a
temporary folder per language, the real `cumulo` runs the guide's config,
and the guide's shell sessions (curl calls and `cumulo services` commands)
are run with bash, their output checked against the output the guide shows.

A listing is a fenced block right after `<!-- guide: NAME -->`. NAME is a
file (`python/users.py`, `cumulo.toml`) or `session NAME`: lines starting
with `$ ` are commands, the lines after each are what it prints. The first
line shown must be the first line printed; the other lines shown must be
printed in that order (the guide leaves out the `date` and `content-length`
headers); a line shown ending in `...` matches any line that starts with the
text before it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

from conftest import ROOT, THREADS, Core, free_port
from gateway_client import Reply, request

GUIDE = ROOT / "docs" / "GUIDE.md"
BIN = ROOT / "target" / "release"
LISTING = re.compile(r"^<!-- guide: (?P<name>[^\n]+?) -->\n```[^\n]*\n(?P<body>.*?)^```$", re.S | re.M)

FILES = {
    "python": ["users.py", "users.toml"],
    "javascript": ["users.mjs", "users.toml"],
    "go": ["go.mod", "main.go", "users.toml"],
}
SESSIONS = ["add", "calls", "errors", "operate"]
LANGUAGES = list(FILES)
# What each SDK says when the handler of GET /api/broken fails (the guide's
# list under "The handler fails: 500").
FAILED = {
    "python": "handler raised RuntimeError: something went wrong",
    "javascript": "handler threw Error: something went wrong",
    "go": "something went wrong",
}
TITLES = {"python": "Python", "javascript": "JavaScript", "go": "Go"}


def listings() -> Dict[str, str]:
    found: Dict[str, str] = {}
    for m in LISTING.finditer(GUIDE.read_text()):
        assert m.group("name") not in found, "two listings named %r" % m.group("name")
        found[m.group("name")] = m.group("body")
    return found


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, "the guide's listing should hold %r once:\n%s" % (old, text)
    return text.replace(old, new)


def session(body: str) -> List[Tuple[str, List[str]]]:
    """[(command, lines shown after it)] of a session listing."""
    steps: List[Tuple[str, List[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, "a session listing starts with a command: %r" % line
            steps[-1][1].append(line)
    return steps


def matches(shown: str, printed: str) -> bool:
    return printed.startswith(shown[:-3]) if shown.endswith("...") else printed == shown


def check_output(command: str, shown: List[str], printed: str) -> None:
    lines = printed.replace("\r\n", "\n").split("\n")
    while lines and lines[-1] == "":
        lines.pop()
    while shown and shown[-1] == "":
        shown = shown[:-1]
    why = "`%s` printed:\n%s\nthe guide shows:\n%s" % (command, "\n".join(lines), "\n".join(shown))
    if not shown:
        return
    assert lines and matches(shown[0], lines[0]), why
    rest = iter(lines[1:])
    for line in shown[1:]:
        assert any(matches(line, printed_line) for printed_line in rest), why


class Guide:
    """One language's folder with the guide's files, and a core running the
    guide's cumulo.toml on free ports."""

    def __init__(self, language: str, work: Path, with_service: bool = False) -> None:
        self.language = language
        self.work = work
        self.port = free_port()
        self.admin_port = free_port()
        found = listings()
        for name in FILES[language]:
            (work / name).write_text(found["%s/%s" % (language, name)])
        self.prepare()
        config = found["cumulo.toml"]
        config = replace_once(config, 'socket = "/tmp/cumulo-guide.sock"', 'socket = "%s/cumulo.sock"' % work)
        config = replace_once(config, "[core]\n", "[core]\nthreads = %d\n" % THREADS)
        config = replace_once(config, "port = 7311", "port = %d" % self.admin_port)
        config = replace_once(config, "port = 8080", "port = %d" % self.port)
        if with_service:  # `cat users.toml >> cumulo.toml`
            config += (work / "users.toml").read_text()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("CUMULO_")}
        self.env["PATH"] = "%s:%s" % (BIN, self.env.get("PATH", ""))
        self.env["CUMULO_ADMIN"] = "http://127.0.0.1:%d" % self.admin_port
        (work / "cumulo.toml").write_text(config)
        check = subprocess.run(["cumulo", "check", "--config", "cumulo.toml"], cwd=work, capture_output=True, env=self.env)
        assert check.returncode == 0, check.stderr.decode()
        # The core passes its environment on to the services: the Python
        # service finds the SDK of this tree whichever Python runs the test.
        core_env = {"PYTHONPATH": str(ROOT / "sdk" / "python" / "src")} if language == "python" else None
        self.core = Core(config, work, env=core_env)

    def prepare(self) -> None:
        """What the guide has the reader do before the service can run."""
        if self.language == "python":
            # `pip install ../cumulo/sdk/python`: this Python has the SDK.
            toml = self.work / "users.toml"
            toml.write_text(replace_once(toml.read_text(), 'path = "python3"', 'path = "%s"' % sys.executable))
        elif self.language == "javascript":
            # `npm install ../cumulo/sdk/javascript` links it under node_modules.
            (self.work / "node_modules").mkdir()
            (self.work / "node_modules" / "cumulo").symlink_to(ROOT / "sdk" / "javascript")
        elif self.language == "go":
            mod = self.work / "go.mod"
            mod.write_text(replace_once(mod.read_text(), "=> ../cumulo/sdk/go", "=> %s" % (ROOT / "sdk" / "go")))
            env = dict(os.environ, GOPROXY="off", GOFLAGS="-mod=mod")
            build = subprocess.run(["go", "build", "-o", "users", "."], cwd=self.work, capture_output=True, env=env)
            assert build.returncode == 0, "go build failed:\n" + build.stderr.decode()

    def get(self, path: str) -> Reply:
        return request(self.port, "GET", path, timeout=5)

    def wait_for(self, what: str, ok: Callable[[Reply], bool], deadline_s: float = 20.0) -> Reply:
        end = time.monotonic() + deadline_s
        last = None
        while time.monotonic() < end:
            if self.core.proc.poll() is not None:
                raise RuntimeError("cumulo exited early:\n" + self.core.log())
            try:
                last = self.get("/api/users/1")
                if ok(last):
                    return last
            except OSError as e:
                last = e
            time.sleep(0.05)
        raise TimeoutError("%s: last answer %r\n%s" % (what, last, self.core.log()))

    def run(self, name: str) -> None:
        for command, shown in session(listings()["session " + name]):
            command = command.replace("127.0.0.1:8080", "127.0.0.1:%d" % self.port)
            command = command.replace("127.0.0.1:7311", "127.0.0.1:%d" % self.admin_port)
            done = subprocess.run(["bash", "-c", command], cwd=self.work, env=self.env, capture_output=True, timeout=30)
            assert done.returncode == 0, "`%s` exited %d:\n%s\n%s" % (
                command,
                done.returncode,
                done.stderr.decode(errors="replace"),
                self.core.log(),
            )
            check_output(command, shown, done.stdout.decode(errors="replace"))

    def stop(self) -> int:
        return self.core.stop()


def require(language: str) -> None:
    program = {"python": None, "javascript": "node", "go": "go"}[language]
    if program and shutil.which(program) is None:
        pytest.fail("%s is needed for the guide's %s service (scripts/setup.sh installs it)" % (program, language))
    if shutil.which("curl") is None:
        pytest.fail("curl is needed for the guide's sessions")


def test_the_guide_has_every_listing():
    found = listings()
    expected = {"cumulo.toml"} | {"session " + s for s in SESSIONS}
    expected |= {"%s/%s" % (lang, f) for lang, files in FILES.items() for f in files}
    assert set(found) == expected


@pytest.mark.parametrize("language", LANGUAGES)
def test_guide_runs_as_written(built, tmp_path, language):
    require(language)
    guide = Guide(language, tmp_path)
    try:
        # 3. The gateway alone: /api/ is no service yet. Then add the service.
        guide.wait_for("the gateway listening", lambda r: r.status == 404)
        guide.run("add")
        guide.wait_for("the service subscribed", lambda r: r.status == 200)
        # 4. The calls, 5. the errors (the slow handler last: it holds the
        # service's one instance for 2 s).
        guide.run("calls")
        # The 500's text is the SDK's message, as the guide lists it (asked
        # before the slow handler holds the instance).
        listed = "`%s` (%s)" % (FAILED[language], TITLES[language])
        assert listed in " ".join(GUIDE.read_text().split())
        broken = guide.get("/api/broken")
        assert broken.status == 500, broken
        # On loopback the detail is shown, followed by the request id.
        want = b"internal server error: the service behind '/api/broken/get' failed: %s (request id " % (
            FAILED[language].encode()
        )
        rest = broken.body[len(want):]
        assert broken.body.startswith(want) and re.fullmatch(rb"[0-9a-f]{16}\)\n", rest), broken.body
        guide.run("errors")
        # 6. Restart: a new process, without the users created since.
        guide.run("operate")
        end = time.monotonic() + 20
        while True:
            r = request(guide.port, "GET", "/api/users/2", timeout=5)
            if r.status == 404 and r.header("content-type") == "application/json":
                break
            assert time.monotonic() < end, "user 2 still there after the restart: %r" % r
            time.sleep(0.05)
        assert json.loads(r.body) == {"error": "no user 2"}
        assert guide.get("/api/users/1").body == b'{"id":1,"name":"alicia"}'
        # 7. The dashboard at the URL the guide gives.
        url = re.search(r"<http://127\.0\.0\.1:7311(/dashboard)>", GUIDE.read_text())
        assert url, "the guide gives the dashboard's URL"
        page = request(guide.admin_port, "GET", url.group(1))
        assert page.status == 200 and "text/html" in (page.header("content-type") or "")
        # `cumulo services remove 2`: its URLs answer 404 again.
        removed = subprocess.run(["cumulo", "services", "remove", "2"], env=guide.env, capture_output=True)
        assert removed.returncode == 0, removed.stderr.decode()
        r = guide.get("/api/users/1")
        assert r.status == 404 and r.body.startswith(b"not found: no service for '/api/users/1/get'")
    finally:
        code = guide.stop()
    assert code == 0, guide.core.log()


def test_service_table_in_cumulo_toml_starts_with_the_core(built, tmp_path):
    """`cat users.toml >> cumulo.toml`: the core starts the service itself."""
    require("python")
    guide = Guide("python", tmp_path, with_service=True)
    try:
        guide.wait_for("the service started with the core", lambda r: r.status == 200)
        guide.run("calls")
    finally:
        code = guide.stop()
    assert code == 0, guide.core.log()
