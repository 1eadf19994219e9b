#!/usr/bin/env bash
# Runs the JavaScript SDK's test suite: installs Node.js if missing and the
# devDependencies (TypeScript, for checking index.d.ts and otel.d.ts; the
# OpenTelemetry API and SDK, for test/otel.test.js), checks the syntax of
# every file of the SDK and its http_req example (node --check), checks that
# a file: install gets the SDK alone (and that cumulo/otel then names the
# optional package it lacks), then node --test.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "the cumulo JavaScript SDK needs Node.js 20 or later, found $(node --version)" >&2
  exit 1
fi

# Reinstall only when the lock file changed since the last install.
if [ ! -d node_modules/typescript ] || [ ! -d node_modules/@opentelemetry/sdk-trace-base ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  if ! npm ci --no-audit --no-fund --loglevel=error >/dev/null; then
    echo "warning: npm ci failed; the index.d.ts check and the otel tests will be skipped" >&2
  fi
fi

for file in *.js test/*.js ../../examples/http_req/javascript/*.mjs; do
  node --check "$file" || { echo "test.sh: node --check failed on $file" >&2; exit 1; }
done

# A program that depends on the SDK with "file:" gets the SDK alone: its
# TypeScript and type packages are devDependencies. --install-links copies
# the SDK as a registry install would; --offline, so a dependency that
# slipped into "dependencies" fails the install rather than being fetched.
consumer=$(mktemp -d)
trap 'rm -rf "$consumer"' EXIT
printf '{"name": "consumer", "version": "1.0.0", "private": true, "dependencies": {"cumulo": "file:%s"}}\n' "$PWD" \
  >"$consumer/package.json"
(cd "$consumer" && npm install --offline --install-links --no-audit --no-fund --loglevel=error >/dev/null) ||
  { echo "test.sh: installing the SDK with file: needs more than the SDK (see its dependencies)" >&2; exit 1; }
installed=$(ls -A "$consumer/node_modules" | grep -v '^\.package-lock\.json$' | tr '\n' ' ')
if [ "$installed" != "cumulo " ]; then
  echo "test.sh: installing the SDK with file: also installed: $installed" >&2
  exit 1
fi
# There, without the optional @opentelemetry/api, cumulo loads and
# cumulo/otel says what it needs.
(cd "$consumer" && node --input-type=module -e "
  await import('cumulo');
  await import('cumulo/otel').then(() => { throw new Error('cumulo/otel loaded without @opentelemetry/api'); },
    (err) => { if (!/npm install @opentelemetry\/api/.test(err.message)) throw err; });") ||
  { echo "test.sh: cumulo/otel without @opentelemetry/api: not the expected error" >&2; exit 1; }

node --test test/*.test.js
