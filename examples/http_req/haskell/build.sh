#!/usr/bin/env bash
# Builds the example with cabal, offline (only the Haskell packages Debian
# installs), incrementally, into .bin/http_req. Called by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")"
sdk=../../../sdk/haskell
export CABAL_CONFIG="$PWD/$sdk/offline.config" CABAL_DIR="$PWD/$sdk/.cabal"
mkdir -p .bin
# Says "compiling" only when cabal has something to build (its dry run
# answers "Up to date" otherwise): scripts/setup.sh tells its reader so.
if [ ! -x .bin/http_req ] || ! cabal build -v1 --dry-run exe:http_req 2>/dev/null | grep -q '^Up to date'; then
    echo "compiling http_req (cabal build)"
fi
cabal build -v0 exe:http_req
install -m 755 "$(cabal list-bin -v0 exe:http_req)" .bin/http_req
