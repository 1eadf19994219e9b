"""docs/SDK_GUIDE.md cannot drift from the code: every call of its table is
exported by every SDK (sdks.py: where each SDK's public names are and how
its language spells a guide name), unless the guide's table of names per SDK
gives another name or says why it is missing; and each of those entries must
still be true."""

from __future__ import annotations

import re

import pytest

from conftest import cell
from sdks import BY_NAME, ROOT, SDKS

GUIDE = ROOT / "docs" / "SDK_GUIDE.md"


def _table(heading: str) -> list[list[str]]:
    """The rows (cells, stripped) of the first table after `heading`."""
    text = GUIDE.read_text()
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            break
    assert rows, f"no table after {heading!r} in {GUIDE}"
    return rows[1:]  # without the header


def guide_calls() -> list[str]:
    """The function names of the calls table: `name(...)` in the first
    column, and every name listed for the accessors and key/value helpers.
    A row without parentheses (`return`: what a handler returns) names
    behaviour, not a function."""
    names = []
    for call, does in _table("## Calls (one instance)"):
        if call in ("accessors", "key/value helpers"):
            names += re.findall(r"`([a-z_]+)", does)
        else:
            names += re.findall(r"`([a-z_]+)\(", call)
    return list(dict.fromkeys(names))


def guide_exceptions() -> dict[tuple[str, str], str]:
    """(sdk, call) -> the SDK's own name, or `missing: why`."""
    found = {}
    for sdk, call, name in _table("## Names per SDK"):
        key = (sdk, call.strip("`"))
        assert key not in found, f"{key} listed twice"
        # The name is the first code span; `info::encode` is info.rs's encode.
        own = name if name.startswith("missing") else re.match(r"`([^`]+)`", name)[1]
        found[key] = own.replace("::", ".")
    return found


CALLS = guide_calls()
EXCEPTIONS = guide_exceptions()


def test_the_guide_tables_parse():
    # The calls of PROTOCOL.md's instance side, and the accessors, at least.
    for name in ("subscribe", "send_sync", "recv_async", "poll", "prefix", "timeout_sync", "info_parse"):
        assert name in CALLS, CALLS
    for (sdk, call), _ in EXCEPTIONS.items():
        assert sdk in BY_NAME, f"the guide names an unknown SDK {sdk!r}"
        assert call in CALLS, f"the guide's names per SDK list {call!r}, which is not a call"


@pytest.mark.parametrize("sdk", [pytest.param(s, id=s.name, marks=cell(s.name, "guide_functions")) for s in SDKS])
def test_every_call_of_the_guide_is_exported(sdk):
    exported = sdk.exports.names()
    assert exported, f"no exported names found for {sdk.name}"
    problems = []
    for call in CALLS:
        own = EXCEPTIONS.get((sdk.name, call))
        conventional = sdk.exports.spell(call)
        if own is None:
            if conventional not in exported:
                problems.append(f"{call}: {conventional} is not exported, and the guide lists no other name or gap")
        elif own.startswith("missing"):
            if conventional in exported:
                problems.append(f"{call}: the guide says it is missing, but {conventional} is exported")
        elif own not in exported:
            problems.append(f"{call}: the guide names {own}, which is not exported")
        elif conventional in exported:
            problems.append(f"{call}: the guide names {own}, but the conventional {conventional} is exported too")
    assert not problems, f"{sdk.name} against docs/SDK_GUIDE.md:\n" + "\n".join(problems)
