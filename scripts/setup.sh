#!/usr/bin/env bash
# Installs what cumulo, its example services and its tests need (only what
# is missing, quietly) and builds them: the core, and the http_req example
# in every language (the steps are in scripts/setup_steps.sh, shared with
# start.sh). Safe to run again: each step is skipped or incremental, and it
# says only what it installs or builds (with everything built: "[setup]
# ready" alone; scripts/setup_test.sh checks it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
source scripts/setup_steps.sh

missing=()
for lang in "${LANGUAGES[@]}" tests; do
    "need_$lang"
done
# (a package two languages need is named once)
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk 'NF && !seen[$0]++')
apt_install "${missing[@]}"

for lang in "${LANGUAGES[@]}" tests; do
    "build_$lang"
done
say "ready"
