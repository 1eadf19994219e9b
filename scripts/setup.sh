#!/usr/bin/env bash
# Installs what cumulo and its example services need (only what is missing,
# quietly) and builds them: the core, and the http_req example in every
# language. Safe to run again: each step is skipped or incremental.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '[setup] %s\n' "$*"; }

# --- system packages (Debian) for the runtimes and builds the examples use
missing=()
command -v ruby >/dev/null 2>&1 || missing+=(ruby)
command -v php >/dev/null 2>&1 || missing+=(php-cli)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# the NATS server the cluster tests and examples run (Debian puts it in /usr/sbin)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# the headless browser the dashboard test (tests/dashboard) drives
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$pyinc/Python.h" ] || missing+=(python3-dev)
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

# --- the core and the Rust example (release build: these are what run)
say "building the core (cargo build --release)"
cargo build --release --workspace --quiet

# --- C and C++ examples (CMake, against sdk/c)
for lang in c cpp; do
    src="examples/http_req/$lang"
    if [ -f "$src/CMakeLists.txt" ]; then
        say "building the $lang example"
        { cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release && cmake --build "$src/build" -j 2; } \
            >"$root/target/setup-$lang.log" 2>&1 || { cat "$root/target/setup-$lang.log" >&2; exit 1; }
    fi
done

# --- Python SDK (with its C codec) in a virtualenv the examples run from
venv="sdk/python/.venv"
if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check setuptools wheel pytest
fi
if [ ! -f "$venv/.installed" ] || [ -n "$(find sdk/python/src sdk/python/src_c sdk/python/setup.py -newer "$venv/.installed" -print -quit)" ]; then
    say "installing the Python SDK into $venv"
    (cd sdk/python && "../../$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall . >/dev/null)
    touch "$venv/.installed"
fi

# --- CloudI's own Python API (PyPI cloudi, with erlang_py), for the
# examples written against it (examples/http_req/python_cloudi, docs/CLOUDI.md)
if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("cloudi") != "2.0.7")' 2>/dev/null; then
    say "installing CloudI's Python API (cloudi 2.0.7) into $venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check cloudi==2.0.7 erlang_py==2.0.7 >/dev/null 2>&1 ||
        "$venv/bin/python" -m pip install -q --disable-pip-version-check cloudi==2.0.7 erlang_py==2.0.7 >/dev/null
fi

# --- Java SDK jar and example classes
jar=$(ls sdk/java/target/cumulo-*.jar 2>/dev/null | grep -v -e sources -e javadoc | head -n 1 || true)
if [ -z "$jar" ]; then
    say "building the Java SDK (mvn package)"
    (cd sdk/java && mvn -q -B -DskipTests install >/dev/null)
    jar=$(ls sdk/java/target/cumulo-*.jar | grep -v -e sources -e javadoc | head -n 1)
fi
if [ ! -f examples/http_req/java/target/HttpReq.class ] || [ examples/http_req/java/HttpReq.java -nt examples/http_req/java/target/HttpReq.class ]; then
    say "compiling the Java example"
    mkdir -p examples/http_req/java/target
    javac -cp "$jar" -d examples/http_req/java/target examples/http_req/java/HttpReq.java
fi

# --- Go example
say "building the Go example"
(cd examples/http_req/go && mkdir -p .bin && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -buildvcs=false -o .bin/http_req .)
say "ready"
