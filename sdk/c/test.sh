#!/usr/bin/env bash
# Tests of the cumulo C and C++ SDKs: the C suite, the C++ suite, both again
# under AddressSanitizer + UndefinedBehaviorSanitizer, standalone builds of the
# http_req examples, and short libFuzzer runs of the frame and key/value
# parsers (when clang is available). Every build but the fuzzing one compiles
# with -Wall -Wextra -Werror: the compilers' warnings are these SDKs' linter.
# Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cpp="$(cd "$here/../cpp" && pwd)"
examples="$(cd "$here/../../examples/http_req" && pwd)"
fuzz_seconds="${CUMULO_FUZZ_SECONDS:-20}"
jobs=2
strict=(-DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror")

# --- tools: cmake, a C/C++ compiler, OpenSSL (TLS; its command makes the
# TLS tests' certificates), cJSON (tests only), clang (fuzzing)
missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
[ -f /usr/include/cjson/cJSON.h ] || missing+=(libcjson-dev)
[ -f /usr/include/openssl/ssl.h ] || missing+=(libssl-dev)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v clang >/dev/null 2>&1 || missing+=(clang)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo"; fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "warning: apt-get could not install ${missing[*]}" >&2
  fi
fi
for tool in cmake cc c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: $tool is required" >&2; exit 1; }
done
[ -f /usr/include/cjson/cJSON.h ] || { echo "error: libcjson-dev is required" >&2; exit 1; }
[ -f /usr/include/openssl/ssl.h ] || { echo "error: libssl-dev is required" >&2; exit 1; }

# Configures, builds (log shown only on failure) and runs CTest.
build() {
  local src="$1" dir="$2"
  shift 2
  mkdir -p "$dir"
  if ! { cmake -S "$src" -B "$dir" "$@" && cmake --build "$dir" -j "$jobs"; } >"$dir/build.log" 2>&1; then
    cat "$dir/build.log" >&2
    echo "error: build of $src failed" >&2
    exit 1
  fi
}
suite() {
  local title="$1" src="$2" dir="$3"
  shift 3
  echo "== $title"
  build "$src" "$dir" "$@"
  (cd "$dir" && ctest --output-on-failure -j "$jobs")
}

suite "C SDK" "$here" "$here/build" -DCMAKE_BUILD_TYPE=Debug "${strict[@]}"
suite "C++ SDK" "$cpp" "$cpp/build" -DCMAKE_BUILD_TYPE=Debug "${strict[@]}"
suite "C SDK, address+undefined sanitizers" "$here" "$here/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCUMULO_SANITIZE=ON "${strict[@]}"
suite "C++ SDK, address+undefined sanitizers" "$cpp" "$cpp/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCUMULO_SANITIZE=ON "${strict[@]}"

echo "== http_req examples (standalone builds)"
for lang in c cpp; do
  build "$examples/$lang" "$examples/$lang/build" -DCMAKE_BUILD_TYPE=Release "${strict[@]}"
  [ -x "$examples/$lang/build/http_req" ] || { echo "error: $lang example not built" >&2; exit 1; }
  echo "examples/http_req/$lang/build/http_req built"
done

if command -v clang >/dev/null 2>&1; then
  echo "== fuzzing, ${fuzz_seconds} s per target"
  CC=clang build "$here" "$here/build-fuzz" -DCUMULO_FUZZ=ON -DCUMULO_BUILD_TESTS=OFF
  for target in frame kv; do
    corpus="$here/build-fuzz/corpus-$target"
    mkdir -p "$corpus"
    cp "$here/fuzz/seeds/$target/"* "$corpus/"
    log="$here/build-fuzz/fuzz_$target.log"
    if ! "$here/build-fuzz/fuzz/fuzz_$target" -max_total_time="$fuzz_seconds" \
        -artifact_prefix="$here/build-fuzz/crash-$target-" "$corpus" >"$log" 2>&1; then
      tail -40 "$log" >&2
      echo "error: fuzz_$target found a failure" >&2
      exit 1
    fi
    echo "fuzz_$target: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1), no failure"
  done
else
  echo "== fuzzing skipped: clang is not available"
fi

echo "all C and C++ SDK suites passed"
