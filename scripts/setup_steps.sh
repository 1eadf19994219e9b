# The steps of scripts/setup.sh, one pair of functions per language, shared
# with start.sh (which runs those a first start needs at once and the others
# while the core already serves). Sourced, with $root set; runs from $root.
#   need_LANG   adds the Debian packages LANG lacks to the array `missing`
#   build_LANG  builds LANG's SDK and http_req example (incremental, quiet)
# Each step says only what it installs or builds (scripts/setup_test.sh).

# The languages of the example services (examples/cumulo.toml), in the order
# they are built.
LANGUAGES=(rust c cpp python go java javascript ruby php perl haskell erlang ocaml ats2)

say() { printf '[setup] %s\n' "$*"; }
# build NAME WHAT WORK CMD...: runs an incremental build with its output in
# target/setup-NAME.log, and says "building WHAT" only once a line of that
# output matches WORK (an extended regex for the tool's "compiling" lines;
# !REGEX: a line that does not match it): a run with everything built says
# nothing. On failure, shows the log.
build() {
    local name="$1" what="$2" work="$3" log="$root/target/setup-$1.log" invert=""
    shift 3
    if [ "${work#!}" != "$work" ]; then invert="-v" work="${work#!}"; fi
    mkdir -p "$root/target"
    if ! "$@" 2>&1 | tee "$log" |
        { if grep -qE $invert -m1 -- "$work"; then say "building $what"; fi; cat >/dev/null; }; then
        cat "$log" >&2
        exit 1
    fi
}
# apt_install PACKAGE...: installs them (quietly; apt-get update only when the
# package lists lack one).
apt_install() {
    [ $# -gt 0 ] || return 0
    say "installing $*"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$@" >/dev/null; }
}
# has_deb PACKAGE: installed (for packages without a command to look for)
has_deb() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# OpenSSL's headers and libraries: the C SDK's TLS (and every program linking it)
need_openssl() { [ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev); }

# --- Rust: the core and the Rust examples (release build: these are what run).
# build_rust [CARGO SELECTION...]: the whole workspace unless packages are
# named. CUMULO_ALL_TARGETS=1 (test.sh sets it) builds the tests too, with
# the dependency features they add (tokio's test clock): then `cargo test`
# and the end-to-end suites reuse this one build instead of making a second.
need_rust() { :; }
build_rust() {
    build cargo "the core (cargo build --release)" '^ *Compiling ' \
        cargo build --release "${@:---workspace}" ${CUMULO_ALL_TARGETS:+--all-targets}
}
# The example of CloudI's Rust API alone (crates.io's cloudi): start.sh builds
# it after the core (build_rust builds it with the workspace).
need_rust_cloudi() { :; }
build_rust_cloudi() {
    build cargo-cloudi "the Rust example of CloudI's API" '^ *Compiling ' cargo build --release -p http_req_cloudi
}

# --- C and C++ examples (CMake, against sdk/c)
need_c() {
    command -v cmake >/dev/null 2>&1 || missing+=(cmake)
    need_openssl
}
need_cpp() { need_c; }
build_cmake_example() {
    local lang="$1" src="examples/http_req/$1"
    [ -f "$src/CMakeLists.txt" ] || return 0
    # configured once: the build runs cmake again itself when CMakeLists.txt changes
    build "$lang" "the $lang example" '(Building|Linking) |Configuring done' bash -c \
        '{ [ -f "$1/build/CMakeCache.txt" ] || cmake -S "$1" -B "$1/build" -DCMAKE_BUILD_TYPE=Release; } &&
        cmake --build "$1/build" -j 2' cmake "$src"
}
build_c() { build_cmake_example c; }
build_cpp() { build_cmake_example cpp; }

# --- Python SDK (with its C codec) in a virtualenv the examples run from,
# and CloudI's own Python API (PyPI cloudi, with erlang_py) for the examples
# written against it (examples/http_req/python_cloudi, docs/CLOUDI.md)
venv="sdk/python/.venv"
need_python() {
    python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
    local pyinc
    pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    [ -f "$pyinc/Python.h" ] || missing+=(python3-dev)
}
build_python() {
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
    if ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("cloudi") != "2.0.7")' 2>/dev/null; then
        say "installing CloudI's Python API (cloudi 2.0.7) into $venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check cloudi==2.0.7 erlang_py==2.0.7 >/dev/null 2>&1 ||
            "$venv/bin/python" -m pip install -q --disable-pip-version-check cloudi==2.0.7 erlang_py==2.0.7 >/dev/null
    fi
}

# --- Go example
# (-v names each package it compiles, and none when all is built)
need_go() { :; }
build_go() {
    mkdir -p examples/http_req/go/.bin
    build go "the Go example" . env -C examples/http_req/go GOTOOLCHAIN=local GOFLAGS=-mod=mod \
        go build -v -buildvcs=false -o .bin/http_req .
}

# --- Java SDK jar and example classes
need_java() { command -v mvn >/dev/null 2>&1 || missing+=(maven); }
build_java() {
    local jar
    jar=$(ls sdk/java/target/cumulo-*.jar 2>/dev/null | grep -v -e sources -e javadoc | head -n 1 || true)
    if [ -z "$jar" ] || [ -n "$(find sdk/java/src sdk/java/pom.xml -newer "$jar" -print -quit)" ]; then
        say "building the Java SDK (mvn package)"
        (cd sdk/java && mvn -q -B -DskipTests install >/dev/null)
        jar=$(ls sdk/java/target/cumulo-*.jar | grep -v -e sources -e javadoc | head -n 1)
    fi
    if [ ! -f examples/http_req/java/target/HttpReq.class ] || [ examples/http_req/java/HttpReq.java -nt examples/http_req/java/target/HttpReq.class ]; then
        say "compiling the Java example"
        mkdir -p examples/http_req/java/target
        javac -cp "$jar" -d examples/http_req/java/target examples/http_req/java/HttpReq.java
    fi
}

# --- JavaScript: CloudI's own JavaScript API (npm cloudi, with erlang_js),
# for examples/http_req/javascript_cloudi and the CloudI tests (docs/CLOUDI.md)
need_javascript() { :; }
build_javascript() {
    if [ ! -f examples/http_req/javascript_cloudi/node_modules/cloudi/Erlang.js ] ||
        ! grep -qs '"version": "2.0.6"' examples/http_req/javascript_cloudi/node_modules/cloudi/package.json; then
        say "installing CloudI's JavaScript API (cloudi 2.0.6) into examples/http_req/javascript_cloudi"
        (cd examples/http_req/javascript_cloudi && npm ci --silent --no-audit --no-fund >/dev/null)
    fi
}

# --- Ruby, PHP, Perl: the interpreters run the examples as they are
need_ruby() { command -v ruby >/dev/null 2>&1 || missing+=(ruby); }
build_ruby() { :; }
need_php() { command -v php >/dev/null 2>&1 || missing+=(php-cli); }
build_php() { :; }
need_perl() { command -v perl >/dev/null 2>&1 || missing+=(perl); }
build_perl() { :; }

# --- Haskell: GHC, cabal and the libraries the SDK uses (cabal builds
# offline from Debian's libghc-*-dev packages: sdk/haskell/offline.config);
# the example is built incrementally by cabal
need_haskell() {
    command -v ghc >/dev/null 2>&1 || missing+=(ghc)
    command -v cabal >/dev/null 2>&1 || missing+=(cabal-install)
    local pkg
    for pkg in libghc-network-dev libghc-hspec-dev; do
        has_deb "$pkg" || missing+=("$pkg")
    done
}
build_haskell() { build haskell "the Haskell example" '^compiling' bash examples/http_req/haskell/build.sh; }

# --- Erlang/OTP and rebar3: the SDK (rebar3, offline: no dependencies) and example
need_erlang() {
    command -v erlc >/dev/null 2>&1 || missing+=(erlang-nox erlang-dev)
    command -v rebar3 >/dev/null 2>&1 || missing+=(rebar3)
}
build_erlang() {
    if [ ! -f sdk/erlang/_build/default/lib/cumulo/ebin/cumulo.beam ] ||
        [ -n "$(find sdk/erlang/src -newer sdk/erlang/_build/default/lib/cumulo/ebin/cumulo.beam -print -quit)" ]; then
        say "building the Erlang SDK (rebar3 compile)"
        (cd sdk/erlang && rebar3 compile >"$root/target/setup-erlang.log" 2>&1) || { cat "$root/target/setup-erlang.log" >&2; exit 1; }
    fi
    if [ ! -f examples/http_req/erlang/ebin/http_req.beam ] || [ examples/http_req/erlang/http_req.erl -nt examples/http_req/erlang/ebin/http_req.beam ]; then
        say "compiling the Erlang example"
        mkdir -p examples/http_req/erlang/ebin
        erlc -Werror -o examples/http_req/erlang/ebin examples/http_req/erlang/http_req.erl
    fi
}

# --- OCaml, dune, findlib and alcotest: the SDK (installed into
# sdk/ocaml/_install for the programs built against it) and example; dune
# rebuilds only what changed (--display short: one line per command dune
# runs, none when all is built)
need_ocaml() {
    command -v ocamlfind >/dev/null 2>&1 || missing+=(ocaml-nox ocaml-findlib)
    command -v dune >/dev/null 2>&1 || missing+=(dune)
    [ -d /usr/lib/ocaml/alcotest ] || missing+=(libalcotest-ocaml-dev)
}
build_ocaml() {
    build ocaml "the OCaml SDK and example (dune)" . bash -c 'set -e
        cd sdk/ocaml && dune build --display short --root . @install
        dune install --root . --prefix "$1/sdk/ocaml/_install" >/dev/null 2>&1
        cd "$1/examples/http_req/ocaml" && OCAMLPATH="$1/sdk/ocaml/_install/lib" dune build --display short --root . ./http_req.exe' \
        ocaml "$root"
}

# --- ATS2: the patscc compiler; make builds the SDK, the C SDK under it,
# then the example (make names the commands it runs, or says the program is
# up to date)
need_ats2() {
    command -v patscc >/dev/null 2>&1 || missing+=(ats2-lang)
    need_openssl
}
build_ats2() { build ats2 "the ATS2 example" '!(is up to date|Nothing to be done)' make --no-print-directory -C examples/http_req/ats2; }

# --- what the tests use besides the languages (test.sh; start.sh does not
# need them)
need_tests() {
    # the NATS server the cluster tests and examples run (Debian puts it in /usr/sbin)
    command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
    # the HTTP server the http_client tests and benchmark send to (run by them, not as a system service)
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    # the HTTP client packaging/deb/test.sh reaches the packaged core's gateway with
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    # the SDKs' linters that come from Debian (sdk/<language>/test.sh runs them)
    command -v perlcritic >/dev/null 2>&1 || missing+=(libperl-critic-perl)
    # the headless browser the dashboard test (tests/dashboard) drives
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
}
build_tests() {
    # ruff, the Python linter sdk/python/test.sh runs (the version it pins)
    local ruff_version
    ruff_version=$(sed -n 's/^RUFF_VERSION=//p' sdk/python/test.sh)
    if [ "$("$venv/bin/ruff" --version 2>/dev/null)" != "ruff $ruff_version" ]; then
        say "installing ruff $ruff_version into $venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check "ruff==$ruff_version" >/dev/null
    fi
    # The OTLP protobuf definitions, for the fake collector of the tracing
    # tests (tests/polyglot/otlp_collector.py), pinned with the Python SDK's
    # OpenTelemetry packages.
    local otel_version
    otel_version=$(sed -n 's/^OTEL_VERSION=//p' sdk/python/test.sh)
    if [ "$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("opentelemetry-proto"))' 2>/dev/null)" != "$otel_version" ]; then
        say "installing opentelemetry-proto $otel_version into $venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check "opentelemetry-proto==$otel_version" >/dev/null
    fi
    # WebSocket client for the gateway's WebSocket tests (tests/gateway/test_websocket.py)
    if ! "$venv/bin/python" -c 'import websockets' 2>/dev/null; then
        say "installing websockets into $venv"
        "$venv/bin/python" -m pip install -q --disable-pip-version-check 'websockets>=13' >/dev/null
    fi
}
