"""Shared fixtures: the codec implementations and the protocol vectors."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterator, List

import pytest

if importlib.util.find_spec("cumulo") is None:  # not installed: test the source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cumulo  # noqa: E402
from cumulo import _pycodec, codec  # noqa: E402

VECTORS_DIR = Path(__file__).resolve().parents[3] / "proto" / "vectors"


def _load_c_codec() -> Any:
    try:
        return importlib.import_module("cumulo._ccodec")
    except ImportError:
        if os.environ.get("CUMULO_REQUIRE_C") == "1":
            raise
        return None


C_CODEC = _load_c_codec()
IMPLEMENTATIONS: List[Any] = [pytest.param(_pycodec, id="python")]
IMPLEMENTATIONS.append(
    pytest.param(C_CODEC, id="c") if C_CODEC is not None
    else pytest.param(None, id="c", marks=pytest.mark.skip(reason="cumulo._ccodec is not built"))
)


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """Each codec implementation in turn."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=IMPLEMENTATIONS)
def use_impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Make ``cumulo.codec`` (and so every new API) use each implementation in turn."""
    module = request.param
    for name in codec.SEAM:
        monkeypatch.setattr(codec, name, getattr(module, name))
    yield module


def load_vectors() -> Dict[str, Dict[str, Any]]:
    files = sorted(VECTORS_DIR.glob("*.json"))
    assert files, "no vectors in %s" % VECTORS_DIR
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in files}


def pytest_report_header(config: pytest.Config) -> str:
    return "cumulo codec: %s (C extension %s)" % (
        cumulo.implementation(), "built" if C_CODEC is not None else "not built")
