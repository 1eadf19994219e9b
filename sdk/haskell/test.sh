#!/usr/bin/env bash
# Tests of the cumulo Haskell SDK: builds it with cabal (offline: only the
# Haskell packages Debian installs, see offline.config) and runs its hspec
# suite (every shared vector, the session against a fake core), then builds
# the http_req example. Installs what is missing first; exits non-zero on
# failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

missing=()
command -v ghc >/dev/null 2>&1 || missing+=(ghc)
command -v cabal >/dev/null 2>&1 || missing+=(cabal-install)
for pkg in libghc-network-dev libghc-hspec-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

export CABAL_CONFIG="$here/offline.config" CABAL_DIR="$here/.cabal"
cd "$here"
# Build quietly (the log is shown on failure), then run the suite: one dot per example and its summary.
if ! cabal build -v1 spec >"$here/.cabal-build.log" 2>&1; then
    cat "$here/.cabal-build.log" >&2
    exit 1
fi
cabal test -v0 --test-show-details=direct --test-options=--format=progress
echo "== http_req example"
bash "$here/../../examples/http_req/haskell/build.sh"
echo "examples/http_req/haskell/.bin/http_req built"
