#!/bin/sh
# Runs the Erlang SDK's checks: rebar3 eunit (every shared vector, the session
# against a fake core, cumulo:run), rebar3 xref, then builds the http_req
# example with warnings as errors and runs its tests. Installs Erlang/OTP and
# rebar3 from Debian when missing.
set -eu
sdk="$(cd "$(dirname "$0")" && pwd)"
example="$sdk/../../examples/http_req/erlang"

missing=""
command -v erlc >/dev/null 2>&1 || missing="$missing erlang-nox erlang-dev"
command -v rebar3 >/dev/null 2>&1 || missing="$missing rebar3"
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq $missing >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq $missing >/dev/null; }
fi

cd "$sdk"
rebar3 eunit
rebar3 xref

mkdir -p "$example/ebin"
erlc -Werror -o "$example/ebin" "$example/http_req.erl" "$example/http_req_tests.erl"
erl -noshell -noinput -pa "$sdk/_build/default/lib/cumulo/ebin" -pa "$example/ebin" -eval '
    case eunit:test(http_req_tests) of ok -> halt(0); _ -> halt(1) end.'
echo "erlang sdk: all checks passed"
