"""A handler's traceback is one record of the core's log, in every language
whose SDK writes one (docs/ADMIN.md, "Logs"): the core groups the lines of
what a process writes on stderr at once, and the indented lines after them."""

from __future__ import annotations

import re
import shutil
import time

import pytest

import cumulo
from conftest import FAULTY, cell, start_core
from sdks import BY_NAME

# Per language: the first line of the record, and what its other lines hold
# (the failure, and a frame of the faulty service's own source).
TRACEBACKS = {
    "python": ("handler for /tests/faulty/python/boom raised",
               ("Traceback (most recent call last):", 'faulty.py", line', "FaultyError: boom from python")),
    "go": ("handler for /tests/faulty/go/boom panicked: boom from go",
           ("goroutine ", "runtime/debug.Stack()", "faulty.go:")),
    "java": ("cumulo: handler for /tests/faulty/java/boom threw Faulty$FaultyException: boom from java",
             ("\tat Faulty.", "(Faulty.java:", "\tat dev.cumulo.Api.")),
    "javascript": ("cumulo: handler for /tests/faulty/javascript/boom threw FaultyError: boom from javascript",
                   ("FaultyError: boom from javascript", "    at ", "faulty.mjs:")),
    "ruby": ("cumulo: handler for /tests/faulty/ruby/boom raised FaultyError: boom from ruby",
             ("boom from ruby (FaultyError)", "\tfrom ", "faulty.rb:")),
    "php": ("cumulo: handler for /tests/faulty/php/boom threw FaultyException: boom from php",
            ("Stack trace:", "#0 ", "faulty.php")),
}

# A service line of the core's text log: the message, the fields, and the
# lines that continue it as one escaped string.
RECORD = re.compile(r" WARN service: (?P<first>.*?) service=(?P<service>\S+) service_id=\d+ process=\d+"
                    r'(?: continued="(?P<continued>.*)")?$')


def unescape(text: str) -> str:
    """The text of a string field, as the log escapes it (Rust's Debug)."""
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}
    return re.sub(r'\\(u\{[0-9a-f]+\}|[nrt"\\\'0])',
                  lambda m: chr(int(m[1][2:-1], 16)) if m[1][0] == "u" else escapes[m[1]], text)


def records(log: str, service: str) -> list[tuple[str, str]]:
    """(first line, continuation lines) of each stderr record of a service."""
    found = []
    for line in log.splitlines():
        m = RECORD.search(line)
        if m and m["service"] == service:
            found.append((m["first"], unescape(m["continued"] or "")))
    return found


@pytest.fixture(scope="module")
def core(tmp_path_factory):
    build = tmp_path_factory.mktemp("build")
    services = []
    for lang in TRACEBACKS:
        sdk = BY_NAME[lang]
        if sdk.build:
            sdk.build(build)
        program, *args = [str(c) for c in sdk.faulty(build)]
        services.append({"prefix": FAULTY.format(lang), "path": program, "args": args,
                         "dir": str(build), "count_process": 1, "count_thread": 1, "timeout_init": 30_000})
    c = start_core(services)
    try:
        c.wait_ready([FAULTY.format(lang) + "ok" for lang in TRACEBACKS])
    except BaseException:
        c.stop()
        shutil.rmtree(c.dir, ignore_errors=True)
        raise
    yield c
    c.assert_stopped_cleanly()
    shutil.rmtree(c.dir, ignore_errors=True)


@pytest.mark.parametrize("lang", [pytest.param(lang, marks=cell(lang, "traceback_one_record")) for lang in TRACEBACKS])
def test_a_handler_traceback_is_one_log_record(core, lang):
    prefix = FAULTY.format(lang)
    first, parts = TRACEBACKS[lang]
    with core.api() as api:
        for _ in range(2):
            with pytest.raises(cumulo.CumuloError) as failed:
                api.send_sync(prefix + "boom", b"", timeout=10_000)
            assert failed.value.status == cumulo.Status.SERVICE_ERROR, failed.value
    # A record is logged once its process has been quiet for a moment.
    deadline = time.monotonic() + 10
    while True:
        failures = [(f, more) for f, more in records(core.log_text(), prefix) if first in f]
        if len(failures) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    log = "\n".join(f"{f}\n{more}" for f, more in records(core.log_text(), prefix))
    assert len(failures) == 2, f"one record per failure, each starting with {first!r}:\n{log}"
    for _, more in failures:
        for part in parts:
            assert part in more, f"{part!r} is not in the record:\n{more}\n\nthe service's records:\n{log}"
    # No line of a traceback is a record of its own.
    strays = [f for f, _ in records(core.log_text(), prefix) if first not in f]
    assert not strays, f"records that are lines of a traceback:\n{strays}"
