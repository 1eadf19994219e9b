#!/usr/bin/env bash
# Builds {{name}} with cabal, with the SDK in {{sdk}}/haskell, offline (only
# the Haskell packages installed on this machine), into ./{{name}}.
set -euo pipefail
cd "$(dirname "$0")"
export CABAL_CONFIG={{sdk}}/haskell/offline.config CABAL_DIR="$PWD/.cabal"
cabal build -v0 exe:{{name}}
install -m 755 "$(cabal list-bin -v0 exe:{{name}})" {{name}}
