#!/usr/bin/env bash
# Starts cumulo with the example services (http_req in every SDK language,
# echo, and the HTTP gateway on 127.0.0.1:8080). Installs and builds what is
# missing first (scripts/setup.sh), saying only what it builds. Stop with
# Ctrl-C. `bash start.sh --setup-only` installs and builds, and stops there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bash "$root/scripts/setup.sh"
[ "${1:-}" = "--setup-only" ] && exit 0
exec "$root/target/release/cumulo" run --config "$root/examples/cumulo.toml" "$@"
