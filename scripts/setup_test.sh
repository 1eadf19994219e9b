#!/usr/bin/env bash
# The setup start.sh runs, run twice: the second run, with everything
# built, must build nothing and say so by saying nothing about building
# (scripts/setup.sh speaks only of what it actually builds).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/start.sh" --setup-only >/dev/null
start=$SECONDS
out=$(bash "$root/start.sh" --setup-only)
took=$((SECONDS - start))
if printf '%s\n' "$out" | grep -i 'building\|installing\|compiling'; then
    echo "setup_test: the second setup run built or installed the above (everything was built by the first)" >&2
    exit 1
fi
if [ "$out" != "[setup] ready" ]; then
    printf 'setup_test: the second setup run said more than "[setup] ready":\n%s\n' "$out" >&2
    exit 1
fi
echo "setup_test: a second setup run builds nothing and says only \"[setup] ready\" (${took}s)"
