#!/usr/bin/env bash
# Tests of the cumulo Haskell SDK: builds it with cabal (offline: only the
# Haskell packages Debian installs, see offline.config) and runs its hspec
# suite (every shared vector, the session against a fake core), then builds
# the http_req example. Exits non-zero on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# GHC, cabal and Debian's Haskell libraries come from scripts/setup.sh.
command -v ghc >/dev/null 2>&1 && command -v cabal >/dev/null 2>&1 ||
    { echo "sdk/haskell/test.sh: ghc and cabal are missing: run scripts/setup.sh" >&2; exit 1; }

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
