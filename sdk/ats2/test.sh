#!/usr/bin/env bash
# Tests of the cumulo ATS2 SDK: builds the C SDK it sits on and the ATS
# bindings (make), runs the test program (every shared vector through the
# codec, the key/value helpers, an instance against a fake core), which
# prints "N passed, N failed", then builds the http_req example. Installs
# what is missing first; exits non-zero on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

missing=()
command -v patscc >/dev/null 2>&1 || missing+=(ats2-lang)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v make >/dev/null 2>&1 || missing+=(make)
[ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)  # the C SDK's TLS
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

# The C compiler's warnings about patsopt's generated C are noise: shown only on failure.
if ! make -s -C "$here" program >"$here/build.log" 2>&1; then
    cat "$here/build.log" >&2
    exit 1
fi
make -s -C "$here" test
echo "== http_req example"
if ! make -s -C "$here/../../examples/http_req/ats2" >"$here/build.log" 2>&1; then
    cat "$here/build.log" >&2
    exit 1
fi
echo "examples/http_req/ats2/build/http_req built"
