#!/usr/bin/env bash
# Checks the Go SDK: go vet and go test (with the race detector when cgo can
# build it), the same for the optional OpenTelemetry module in otel/ (a
# module of its own, whose dependencies come from the Go module proxy the
# first time), then vets, tests and builds the http_req example. Exits
# non-zero on the first failure.
set -euo pipefail

sdk="$(cd "$(dirname "$0")" && pwd)"
example="$sdk/../../examples/http_req/go"

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: installing golang-go" >&2
  apt-get update -qq && apt-get install -y -qq golang-go >/dev/null
fi
export GOTOOLCHAIN=local   # never try to download another toolchain
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

race=""
if [ "$(go env CGO_ENABLED)" = 1 ] && command -v gcc >/dev/null 2>&1; then
  race="-race"
fi

cd "$sdk"
go vet ./...
go test $race -count=1 ./...

# otel/ is a nested module (go test ./... above skips it): its go.mod and
# go.sum pin the OpenTelemetry modules; -mod=readonly never rewrites them.
cd "$sdk/otel"
go mod download   # silent, unlike the "go: downloading" lines of a first vet
go vet -mod=readonly ./...
go test $race -mod=readonly -count=1 ./...

cd "$example"
go vet ./...
go test -count=1 ./...
go build -o /dev/null .
echo "go sdk: all checks passed"
