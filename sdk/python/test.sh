#!/usr/bin/env bash
# Install the cumulo Python SDK into .venv (with its C codec when a C compiler
# is present), lint it and the Python http_req examples with ruff (rules in
# pyproject.toml), and run its test suite. Idempotent; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}

apt_install() {
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing $* with apt-get" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null \
            || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
    else
        echo "missing $* (install it, or run as root with apt-get)" >&2
        return 1
    fi
}

# Debian splits venv/ensurepip out of python3.
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
    apt_install python3-venv
fi

compiler=""
if command -v cc >/dev/null || command -v gcc >/dev/null; then
    compiler=yes
    # The extension also needs this interpreter's headers.
    include=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    if [ ! -f "$include/Python.h" ]; then
        apt_install python3-dev || compiler=""
    fi
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
VENV_PYTHON=.venv/bin/python
if ! "$VENV_PYTHON" -c 'import setuptools, wheel, pytest' 2>/dev/null; then
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check setuptools wheel pytest
fi
# cumulo.otel's tests: the OpenTelemetry API and SDK (pinned, as ruff is below).
OTEL_VERSION=1.45.2
if [ "$("$VENV_PYTHON" -c 'import opentelemetry.version as v; print(v.__version__)' 2>/dev/null)" != "$OTEL_VERSION" ] ||
    ! "$VENV_PYTHON" -c 'import opentelemetry.sdk' 2>/dev/null; then
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check \
        "opentelemetry-api==$OTEL_VERSION" "opentelemetry-sdk==$OTEL_VERSION"
fi
# The linter, pinned so that a new release's rules cannot fail an unchanged tree.
RUFF_VERSION=0.17.6
if [ "$(.venv/bin/ruff --version 2>/dev/null)" != "ruff $RUFF_VERSION" ]; then
    "$VENV_PYTHON" -m pip install -q --disable-pip-version-check "ruff==$RUFF_VERSION"
fi
.venv/bin/ruff check --quiet --no-cache --config pyproject.toml src tests setup.py \
    ../../examples/http_req/python ../../examples/http_req/python_c ../../examples/http_req/python_cloudi
# Reinstall from this tree every time; build/ is left behind by setuptools.
"$VENV_PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall . 
rm -rf build src/cumulo.egg-info

if [ -n "$compiler" ]; then
    # With a compiler the C codec must have been built: its tests may not be skipped.
    export CUMULO_REQUIRE_C=1
fi
unset CUMULO_PURE_PYTHON
"$VENV_PYTHON" -c 'import cumulo; print("cumulo codec:", cumulo.implementation())'
exec "$VENV_PYTHON" -m pytest -p no:cacheprovider tests "$@"
