#!/usr/bin/env bash
# Builds the fuzz targets (cargo fuzz, libFuzzer) and runs each one for a
# bounded time, after replaying every input in fuzz/regressions/<target>/.
# Works on the stable toolchain (see fuzz/README.md for why and how).
#
#   bash fuzz/run.sh --quick            # test.sh: all in 4 min, build included
#   bash fuzz/run.sh                    # 60 s per target
#   bash fuzz/run.sh --seconds 3600 core_frames   # one target, an hour
#   bash fuzz/run.sh --regressions      # only replay the regression inputs
#
# New inputs that add coverage are kept in fuzz/corpus/<target>/ (not
# committed); a crash is saved under fuzz/artifacts/<target>/ and fails the
# run. Exit status: 0 when no target crashed.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
cd "$root"

seconds=60
quick=0
# --quick: the whole run, build included, within this many seconds: the
# targets share what the build left, 3 .. 10 s each.
quick_budget=240
replay_only=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --seconds) seconds="$2"; shift ;;
        --regressions) replay_only=1 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
# Every file in fuzz/src/bin/ is a target.
[ ${#targets[@]} -eq 0 ] && targets=($(ls "$here/src/bin" | sed -n 's/\.rs$//p'))

say() { printf '[fuzz] %s\n' "$*"; }

# libFuzzer itself is C++, built by libfuzzer-sys.
if ! command -v c++ >/dev/null 2>&1; then
    say "installing g++"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq g++ >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq g++ >/dev/null; } || exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked --quiet || exit 1
fi

# libFuzzer's instrumentation flags are stable rustc flags; only the build
# of libfuzzer-sys and cargo-fuzz's own checks want a nightly compiler,
# which RUSTC_BOOTSTRAP=1 stands in for. No sanitizer: the code under test
# has no unsafe, and the run stays fast; -s address works on nightly.
export RUSTC_BOOTSTRAP=1
start=$SECONDS
say "building ${#targets[@]} targets"
(cd "$root" && cargo fuzz build --sanitizer none --fuzz-dir "$here" ${FUZZ_BUILD_FLAGS:-}) || exit 1
say "built in $((SECONDS - start)) s"
if [ $quick = 1 ]; then
    left=$((quick_budget - (SECONDS - start) - 15))
    seconds=$((left / ${#targets[@]}))
    [ $seconds -gt 10 ] && seconds=10
    [ $seconds -lt 3 ] && seconds=3
    say "quick run: $seconds s per target"
fi
triple="$(rustc -vV | sed -n 's/^host: //p')"
bin="$here/target/$triple/release"

seeds="$here/target/seeds"
rm -rf "$seeds"
python3 "$here/seeds.py" "$seeds" || exit 1

failed=()
for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] || { say "$t: not built"; failed+=("$t"); continue; }
    reg="$here/regressions/$t"
    if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
        if "$bin/$t" -timeout=30 "$reg"/* >"$here/target/$t.replay.log" 2>&1; then
            say "$t: $(ls "$reg" | wc -l) regression inputs pass"
        else
            tail -n 30 "$here/target/$t.replay.log"
            say "$t: a regression input FAILS (log: fuzz/target/$t.replay.log)"
            failed+=("$t")
            continue
        fi
    fi
    [ $replay_only = 1 ] && continue
    corpus="$here/corpus/$t"
    artifacts="$here/artifacts/$t"
    mkdir -p "$corpus" "$artifacts" "$seeds/$t"
    # -timeout: one input taking this long is a hang, reported like a crash.
    if "$bin/$t" "$corpus" "$seeds/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
        -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$here/target/$t.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$here/target/$t.log")
        say "$t: ${runs:-?} inputs in ${seconds} s, no crash"
    else
        tail -n 40 "$here/target/$t.log"
        say "$t: CRASH (log: fuzz/target/$t.log; input in fuzz/artifacts/$t/)."
        say "  reproduce: fuzz/target/$triple/release/$t <input>; then add it to fuzz/regressions/$t/"
        failed+=("$t")
    fi
done
say "done in $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
    say "failed: ${failed[*]}"
    exit 1
fi
