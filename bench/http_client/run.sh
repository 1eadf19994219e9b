#!/usr/bin/env bash
# http_client: outgoing HTTP through cumulo's `http_client` service against
# the same load without cumulo, in one run, all against one nginx on
# loopback (bench/gateway/nginx.conf: the http_req XML, keep-alive), each
# client keeping CONCURRENCY requests in flight (closed loop):
#   1. bare hyper: hyper-util's pooled client, one thread (hc-bench bare):
#      the ceiling;
#   2. the Rust SDK through `http_client` (hc-bench sdk: send_async x
#      CONCURRENCY to /http/get): the headline;
#   3. a Python program through `http_client` (client.py cumulo, the
#      Python SDK the same way);
#   4. the same Python program with urllib3 (client.py urllib3: CONCURRENCY
#      threads sharing one PoolManager of CONCURRENCY connections).
#
#   bash bench/http_client/run.sh [--quick] [--rounds N] [--seconds S] [--no-build]
# Default: 3 rounds of 10 s per client, CONCURRENCY 16 (environment).
# --quick: 1 round of 2 s. --no-build: the binaries as built (else the
# workspace is built first, as every bench does). Each figure is the
# median over the rounds with its spread (bench/lib.sh). Last line:
#   http_client: <Rust SDK through http_client> req/s, ratio <x> to bare hyper
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/bench/lib.sh"
rounds=3 seconds=10 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) rounds=1 seconds=2 ;;
        --rounds) rounds=$2; shift ;;
        --seconds) seconds=$2; shift ;;
        --no-build) build=0 ;;
        -h | --help) bench_help "$0"; exit 0 ;;
        *) echo "usage: bash bench/http_client/run.sh [--quick] [--rounds N] [--seconds S] [--no-build]" >&2; exit 2 ;;
    esac
    shift
done
concurrency=${CONCURRENCY:-16}

bench_lock http_client
bench_apt_install nginx=nginx
[ "$build" = 0 ] || bench_build
cumulo=${CUMULO_BIN:-$root/target/release/cumulo}
hc=$root/target/release/hc-bench
for bin in "$cumulo" "$hc"; do
    [ -x "$bin" ] || { echo "http_client: $bin is not built (cargo build --release --workspace)" >&2; exit 1; }
done
python3 -c 'import urllib3' 2>/dev/null || { echo "http_client: python3 has no urllib3 (pip install urllib3)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cumulo-bench-http-client.XXXXXX")
bench_traps "$work"

port=$(free_port)
start_static_nginx "$work/nginx" "$port"
url="http://127.0.0.1:$port/tests/http_req/rust.xml?value=42"

cat >"$work/cumulo.toml" <<TOML
[core]
socket = "$work/cumulo.sock"
threads = 1

[[service]]
prefix = "/http/"
internal = "http_client"
settings = { max_idle_per_host = $concurrency }
TOML
"$cumulo" run --config "$work/cumulo.toml" 2>"$work/cumulo.log" &
pids+=($!)
wait_for test -S "$work/cumulo.sock" || { cat "$work/cumulo.log" >&2; exit 1; }
# warm-up: the service subscribed, the pool filled
"$hc" sdk "$work/cumulo.sock" /http/get "$url" "$concurrency" 0.5 >/dev/null ||
    { cat "$work/cumulo.log" >&2; exit 1; }

export PYTHONPATH=$root/sdk/python/src${PYTHONPATH:+:$PYTHONPATH}
declare -A got
labels=("bare hyper" "Rust SDK -> http_client" "Python SDK -> http_client" "Python urllib3")
for round in $(seq "$rounds"); do
    got[0]+="$("$hc" bare "$url" "$concurrency" "$seconds" | cut -d' ' -f1) "
    got[1]+="$("$hc" sdk "$work/cumulo.sock" /http/get "$url" "$concurrency" "$seconds" | cut -d' ' -f1) "
    got[2]+="$(python3 "$root/bench/http_client/client.py" cumulo "$work/cumulo.sock" /http/get "$url" "$concurrency" "$seconds" | cut -d' ' -f1) "
    got[3]+="$(python3 "$root/bench/http_client/client.py" urllib3 "$url" "$concurrency" "$seconds" | cut -d' ' -f1) "
    echo "  round $round (req/s): $(for i in 0 1 2 3; do printf '%s: %s; ' "${labels[$i]}" "$(awk '{print $NF}' <<<"${got[$i]}")"; done)" >&2
done

machine_line
echo "concurrency $concurrency, $rounds rounds of $seconds s, nginx on loopback ($url)"
for i in 0 1 2 3; do
    tr ' ' '\n' <<<"${got[$i]}" | sed '/^$/d' | spread_line "${labels[$i]}" "req/s"
done
med() { tr ' ' '\n' <<<"${got[$1]}" | sed '/^$/d' | median; }
bare=$(med 0) sdk=$(med 1) py=$(med 2) u3=$(med 3)
echo "Python through http_client: ratio $(awk -v a="$py" -v b="$u3" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }') to Python urllib3"
echo "http_client: $(printf '%.0f' "$sdk") req/s, ratio $(awk -v a="$sdk" -v b="$bare" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }') to bare hyper"
