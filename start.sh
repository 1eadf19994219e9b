#!/usr/bin/env bash
# Starts cumulo with the example services (http_req in every SDK language,
# echo, and the HTTP gateway on 127.0.0.1:8080), answering early:
#  1. installs and builds what the core and the languages whose toolchains
#     this machine has need (scripts/setup_steps.sh), starts the core with
#     their services (target/start/cumulo.toml, from examples/cumulo.toml)
#     and says "ready" once the gateway answers;
#  2. then, while the core serves, installs and builds the other languages
#     one by one, adds each one's services to the running core (admin API,
#     POST /v1/services) as it is ready, and prints a summary.
# Ctrl-C stops the core and that work; the exit code is the core's. Logs of
# each language: target/start/LANGUAGE.log. Other arguments go to `cumulo run`.
#
#   bash start.sh --setup-only   installs and builds everything (scripts/setup.sh), and stops
#   CUMULO_START_LATER=ruby,haskell bash start.sh
#                                these join in step 2 even if ready (to skip a
#                                slow one at first; scripts/start_test.sh uses it;
#                                Rust and Python always start first)
#   CUMULO_START_GATEWAY_PORT=8081 CUMULO_START_ADMIN_PORT=7312 bash start.sh
#                                other ports than examples/cumulo.toml's
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$root"
if [ "${1:-}" = "--setup-only" ]; then
    exec bash scripts/setup.sh
fi
source scripts/setup_steps.sh
out="target/start"
mkdir -p "$out"
note() { printf '[start] %s\n' "$*"; }
services() { python3 scripts/start_services.py "$@"; }
# A step of scripts/setup_steps.sh in a shell of its own, where errexit holds
# however the caller tests its status.
step=(bash -c 'set -euo pipefail; root=$PWD; source scripts/setup_steps.sh; "$@"' step)

# --- which languages start with the core: Rust and Python (the core, and the
# first request), and every other whose toolchain is installed
first=(rust python) later=(rust_cloudi)
declare -A why=()
for lang in "${LANGUAGES[@]}"; do
    case "$lang" in rust | python) continue ;; esac
    missing=()
    "need_$lang"
    if [ ${#missing[@]} -eq 0 ] && [[ ",${CUMULO_START_LATER:-}," != *",$lang,"* ]]; then
        first+=("$lang")
    else
        later+=("$lang")
    fi
done

# --- step 1: install and build those, then start the core with them
missing=()
need_rust
need_python
apt_install "${missing[@]}"
# The other builds (mostly downloads: pip, npm, Go modules) run while cargo
# builds the core, in a process group of their own, stopped if this script
# ends first (Ctrl-C, or the core's build failing).
: >"$out/built"
others() {
    "${step[@]}" build_python
    local lang
    for lang in "${first[@]:2}"; do
        if "${step[@]}" "build_$lang" 2>"$out/$lang.log"; then
            echo "$lang" >>"$out/built"
        else
            note "$lang: failed to build (see $out/$lang.log); left out"
        fi
    done
}
set -m
others &
others_pid=$!
set +m
trap 'kill -- -"$others_pid" 2>/dev/null || true' EXIT
if [ -n "${CUMULO_ALL_TARGETS:-}" ]; then
    # Under test.sh, whose setup built the workspace with its tests: the same
    # selection, then up to date. The core alone would resolve other features
    # of its dependencies (tokio's, hyper-util's) and build most of it again.
    build_rust
else
    build_rust -p cumulo -p http_req
fi
wait "$others_pid" || { echo "start.sh: the Python SDK could not be installed" >&2; exit 1; }
trap - EXIT
mapfile -t built <"$out/built"
serving=(rust python "${built[@]}")
for lang in "${first[@]:2}"; do
    # a language that failed to build is left out, and said so in the summary
    [[ " ${built[*]} " == *" $lang "* ]] || why[$lang]="failed to build (see $out/$lang.log)"
done
cfg="$out/cumulo.toml"
services config examples/cumulo.toml "$cfg" "${serving[@]}"
url="$(services gateway "$cfg")/tests/http_req/python.xml?value=42"

# Core and step 2 each in a process group of their own (set -m): Ctrl-C
# reaches this script alone, which stops the core with SIGINT, as the
# terminal would, and step 2 once the core has exited.
core="" stopping=""
stop() {
    stopping=1
    [ -z "$core" ] || kill -INT "$core" 2>/dev/null || true
}
trap stop INT TERM HUP
set -m
target/release/cumulo run --config "$cfg" "$@" &
core=$!
[ -z "$stopping" ] || stop
since=$SECONDS
until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
    kill -0 "$core" 2>/dev/null || break
    if [ $((SECONDS - since)) -ge 120 ]; then
        note "no answer from $url within 120s; the core runs on"
        break
    fi
    sleep 0.2
done

# --- step 2 (in the background): the other languages, one by one
step2() {
    local lang log patterns count=0
    declare -A served=()
    fail() {
        why[$1]="$2"
        note "$1: $2"
    }
    joined() {
        note "$1: serving $2"
        served[$1]="$2"
        count=$((count + 1))
    }
    for lang in "${serving[@]}"; do
        if patterns=$(services serving "$cfg" "$lang" 2>>"$out/$lang.log"); then
            joined "$lang" "$patterns"
        else
            fail "$lang" "not serving (see $out/$lang.log and the core's log)"
        fi
    done
    for lang in "${later[@]}"; do
        log="$out/$lang.log"
        : >"$log"
        missing=()
        "need_$lang"
        if [ ${#missing[@]} -gt 0 ]; then
            note "$lang: installing ${missing[*]}"
            # in a session of its own: Ctrl-C does not stop dpkg half-way
            if ! setsid -w "${step[@]}" apt_install "${missing[@]}" >>"$log" 2>&1; then
                fail "$lang" "failed to install ${missing[*]} (see $log)"
                continue
            fi
        fi
        # what the build says it builds (scripts/setup_steps.sh), under this language's name
        if ! "${step[@]}" "build_$lang" 2>>"$log" | sed -u "s/^\[setup\] /[start] $lang: /"; then
            fail "$lang" "failed to build (see $log)"
            continue
        fi
        if patterns=$(services add "$cfg" examples/cumulo.toml "$lang" 2>>"$log"); then
            joined "$lang" "$patterns"
        else
            fail "$lang" "not serving (see $log and the core's log)"
        fi
    done
    note "summary: $count of $((${#LANGUAGES[@]} + 1)) languages serving (${SECONDS}s since the start)"
    for lang in rust rust_cloudi "${LANGUAGES[@]:1}"; do
        printf '[start]   %-12s %s\n' "$lang" "${served[$lang]:-${why[$lang]:-}}"
    done
}
step2_pid=""
if kill -0 "$core" 2>/dev/null; then
    note "ready in ${SECONDS}s: curl '$url'"
    [ ${#later[@]} -eq 0 ] || note "joining while the core serves: ${later[*]}"
    step2 &
    step2_pid=$!
fi

rc=0
while :; do
    rc=0
    wait "$core" || rc=$?
    kill -0 "$core" 2>/dev/null || break
done
if [ -n "$step2_pid" ]; then
    kill -TERM -- -"$step2_pid" 2>/dev/null || true
    wait "$step2_pid" 2>/dev/null || true
fi
exit "$rc"
