#!/usr/bin/env bash
# Checks the Rust SDK: the shared vectors through the codec it encodes and
# decodes with (cumulo-proto), the SDK's own tests against a fake core (again
# with the feature `otel`, for cumulo::otel), and the build of the http_req
# example. Installs cargo if it is missing.
# Exits non-zero on the first failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo not found: installing it with apt-get" >&2
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y -qq cargo >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq cargo >/dev/null; }
fi

cargo test --release --quiet -p cumulo-proto -p cumulo-sdk "$@"
cargo test --release --quiet -p cumulo-sdk --features otel "$@"
# as scripts/setup.sh builds it: `-p` would rebuild with other features
cargo build --release --quiet --workspace ${CUMULO_ALL_TARGETS:+--all-targets}
echo "rust sdk: all checks passed"
