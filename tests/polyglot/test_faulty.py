"""A handler that raises (throws, panics, fails) is answered SERVICE_ERROR
with a message, and its instance keeps serving."""

from __future__ import annotations

import re

import pytest

import cumulo
from conftest import FAULTY, FAULTY_LANGUAGES, cell
from sdks import BY_NAME


# What the message must name (sdks.py, `failure_words`): the failure's text,
# and its exception class where the language has one (docs/SDK_GUIDE.md: "a
# message naming the exception"); a Rust panic is named as one; C has no
# exceptions, its SDK names the pattern and the status the handler returned.
@pytest.mark.parametrize("lang", [pytest.param(lang, marks=cell(lang, "service_error")) for lang in FAULTY_LANGUAGES])
def test_handler_failure_is_service_error_and_instance_keeps_serving(core, api, lang):
    prefix = FAULTY.format(lang)
    for _ in range(3):
        with pytest.raises(cumulo.CumuloError) as failed:
            api.send_sync(prefix + "boom", b"", timeout=10_000)
        assert failed.value.status == cumulo.Status.SERVICE_ERROR, failed.value
        for part in BY_NAME[lang].failure_words:
            assert part in failed.value.message
        # The service runs a single instance: this is the one that failed.
        assert api.send_sync(prefix + "ok", b"", timeout=10_000)[1] == b"ok"

    log = core.log_text()
    starts = [pid for pid, p in core.started() if p == prefix]
    assert len(starts) == 1, f"{prefix} was restarted: pids {starts}"
    exits = re.findall(rf"process \d+ (?:exited|killed).* service={re.escape(prefix)}\s", log)
    assert not exits, exits
