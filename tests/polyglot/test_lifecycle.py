"""The core starts every example service of examples/cumulo.toml, and SIGTERM
stops it and all of them: exit code 0, no process left behind."""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import HTTP_REQ, LANGUAGES, XML_INFO, Core, example_services, http_req_names, start_core, value_xml


@pytest.fixture(scope="module")
def examples_core() -> Core:
    c = start_core(example_services())
    yield c
    c.stop()
    shutil.rmtree(c.dir, ignore_errors=True)


def test_every_language_answers(examples_core):
    examples_core.wait_ready(http_req_names())
    with examples_core.api() as api:
        for lang in LANGUAGES:
            assert api.send_sync(HTTP_REQ.format(lang), b"value\x00123\x00") == (XML_INFO, value_xml(123)), lang


def test_every_process_of_the_config_is_started(examples_core):
    expected = sum(s.get("count_process", 1) for s in examples_core.services if "path" in s)
    started = examples_core.started()
    assert len(started) == expected, started
    assert not re.search(r"init failed|exited with code|killed by signal", examples_core.log_text())


def test_sigterm_stops_core_and_services(examples_core):
    started = examples_core.started()
    examples_core.assert_stopped_cleanly()
    log = examples_core.log_text()
    # Every process left on its own after TERMINATE, with code 0: none needed a signal.
    assert len(re.findall(r"process \d+ exited with code 0", log)) == len(started), log[-4000:]
    assert "after TERMINATE" not in log and "ignored SIGTERM" not in log, log[-4000:]
