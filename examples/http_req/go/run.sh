#!/usr/bin/env bash
# Builds the example (the go tool caches the build) and runs it in place of
# this script, so a cumulo config can start it with path = "bash" and this
# script in args. The lock keeps processes started together from writing
# the binary at the same time.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p .bin
(flock 9 && GOTOOLCHAIN=local go build -buildvcs=false -o .bin/http_req .) 9>.bin/lock
exec .bin/http_req "$@"
