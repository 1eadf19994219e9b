#!/usr/bin/env bash
# Runs the OCaml SDK's checks: dune build (every warning an error) and dune
# test (alcotest: every shared vector, the session against a fake core,
# Cumulo.run with threads); then installs the SDK into _install (as
# scripts/setup.sh does) and builds and tests the http_req example against
# it. Installs OCaml, dune, findlib and alcotest from Debian when missing.
set -euo pipefail
sdk="$(cd "$(dirname "$0")" && pwd)"
example="$sdk/../../examples/http_req/ocaml"

missing=""
command -v ocamlfind >/dev/null 2>&1 || missing="$missing ocaml-nox ocaml-findlib"
command -v dune >/dev/null 2>&1 || missing="$missing dune"
ocamlfind query alcotest >/dev/null 2>&1 || missing="$missing libalcotest-ocaml-dev"
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq $missing >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq $missing >/dev/null; }
fi

cd "$sdk"
dune build --root . 2>&1
dune test --root . --force 2>&1 | grep -v '^  \[OK\]'
dune install --root . --prefix "$sdk/_install" >/dev/null 2>&1

cd "$example"
OCAMLPATH="$sdk/_install/lib" dune build --root . 2>&1
OCAMLPATH="$sdk/_install/lib" dune test --root . --force 2>&1 | grep -v '^  \[OK\]'
echo "ocaml sdk: all checks passed"
