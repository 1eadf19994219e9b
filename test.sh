#!/usr/bin/env bash
# Runs every test of cumulo: the Rust workspace (codec vectors, core unit
# tests, core end-to-end tests), each SDK's own suite in its own language,
# and the cross-language and HTTP gateway end-to-end suites. Installs and
# builds what is missing first (scripts/setup.sh). Prints one summary line;
# exits non-zero if any suite failed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$root"
# One build for everything: the workspace with its tests (scripts/setup.sh).
export CUMULO_ALL_TARGETS=1
bash scripts/setup.sh || { echo "setup failed"; exit 1; }
# (scripts/setup.sh also installs the headless Chromium the browser tests drive.)

passed=0
failed=0
failed_names=()
suite() {
    local name="$1"
    shift
    local start=$SECONDS
    printf '\n=== %s\n' "$name"
    if "$@"; then
        passed=$((passed + 1))
        printf '=== %s: passed (%ss)\n' "$name" $((SECONDS - start))
    else
        failed=$((failed + 1))
        failed_names+=("$name")
        printf '=== %s: FAILED (%ss)\n' "$name" $((SECONDS - start))
    fi
}
py="$root/sdk/python/.venv/bin/python"

suite "Setup: a second run of start.sh's setup builds nothing and says so (bash scripts/setup_test.sh)" \
    bash scripts/setup_test.sh
suite "Start: start.sh answers first, then the languages held back join the running core; SIGINT stops it (bash scripts/start_test.sh)" \
    bash scripts/start_test.sh
suite "Rust: format and lints (cargo fmt --check; cargo clippy -D warnings, workspace lints in Cargo.toml)" \
    bash -c "cargo fmt --all --check && cargo clippy --release --workspace --all-targets --quiet -- -D warnings &&
        cargo clippy --release -p cumulo-sdk --all-targets --features otel --quiet -- -D warnings"
# The Rust SDK's `otel` feature (cumulo::otel) is off in the workspace build: its tests run on their own.
suite "Rust: codec vectors, core, Rust SDK, core and cluster end-to-end" \
    bash -c "cargo test --release --workspace --no-fail-fast && cargo test --release --quiet -p cumulo-sdk --features otel"
suite "Fuzzing: regression inputs, then every target briefly (bash fuzz/run.sh --quick)" bash fuzz/run.sh --quick
suite "C and C++ SDKs" bash sdk/c/test.sh
suite "Python SDK" bash sdk/python/test.sh
suite "Go SDK" bash sdk/go/test.sh
suite "Java SDK" bash sdk/java/test.sh
suite "JavaScript SDK" bash sdk/javascript/test.sh
suite "Ruby SDK" bash sdk/ruby/test.sh
suite "PHP SDK" bash sdk/php/test.sh
suite "Perl SDK" bash sdk/perl/test.sh
suite "Haskell SDK" bash sdk/haskell/test.sh
suite "Erlang SDK" bash sdk/erlang/test.sh
suite "OCaml SDK" bash sdk/ocaml/test.sh
suite "ATS2 SDK" bash sdk/ats2/test.sh
suite "Debian package: build, contents, the packaged core serving echo through its gateway (bash packaging/deb/test.sh)" \
    bash packaging/deb/test.sh
suite "Relay (benchmark ceiling) protocol tests" bash -c "make -s -C bench/relay >/dev/null && python3 -m unittest -q bench/relay/test_relay.py"
[ -d tests/polyglot ] && suite "Cross-language end-to-end" "$py" -m pytest -q tests/polyglot
[ -d tests/gateway ] && suite "HTTP gateway end-to-end" "$py" -m pytest -q tests/gateway
[ -d tests/dashboard ] && suite "Dashboard in headless Chromium" "$py" -m pytest -q tests/dashboard
[ -d tests/scaffold ] && suite "cumulo new: a service in every SDK language, built and run under a core" \
    "$py" -m pytest -q tests/scaffold

# The end-to-end suites again with the core on two threads (core.threads = 2:
# shards, docs/ARCHITECTURE.md); the harnesses read CUMULO_TEST_THREADS.
# `--workspace` keeps the dependency features of the first run, so the test
# binaries built there are reused rather than built again.
suite "Core, admin, queue and services end-to-end, core.threads = 2" \
    env CUMULO_TEST_THREADS=2 cargo test --release --workspace --no-fail-fast --test e2e --test admin --test queue --test services
[ -d tests/polyglot ] && suite "Cross-language end-to-end, core.threads = 2" \
    env CUMULO_TEST_THREADS=2 "$py" -m pytest -q tests/polyglot
[ -d tests/gateway ] && suite "HTTP gateway end-to-end, core.threads = 2" \
    env CUMULO_TEST_THREADS=2 "$py" -m pytest -q tests/gateway

echo
[ $failed -gt 0 ] && printf 'failed suites: %s\n' "${failed_names[*]}"
echo "suites: $passed passed, $failed failed"
[ $failed -eq 0 ]
