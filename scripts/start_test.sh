#!/usr/bin/env bash
# start.sh on a machine with everything installed and built: it answers its
# first request with the languages held back by CUMULO_START_LATER left out
# of the core's config, then those join the running core through the admin
# API, every http_req service of examples/cumulo.toml answers through the
# gateway, the summary says every language serves, and SIGINT stops the core
# and every process start.sh started, with exit code 0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
later=ruby,haskell
fail() {
    printf 'start_test: %s\n--- start.sh output (last 60 lines):\n' "$*" >&2
    tail -n 60 "$log" >&2
    exit 1
}
# every process below start.sh (the core, step 2, the services)
descendants() {
    local p
    for p in $(ps -o pid= --ppid "$1"); do
        echo "$p"
        descendants "$p"
    done
}
log=$(mktemp)
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        local left
        left=$(descendants "$pid")
        kill -INT "$pid" 2>/dev/null
        sleep 5
        # shellcheck disable=SC2086 # a list of pids
        kill -KILL "$pid" $left 2>/dev/null || true
    fi
    rm -f "$log"
}
trap cleanup EXIT
# Free ports: a core already running on this machine does not stand in the way.
read -r gw admin < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
base="http://127.0.0.1:$gw/tests/http_req"
# -m: the background start.sh gets SIGINT (a script's background jobs
# otherwise ignore it, and start.sh could not trap it). SIGINT is also set
# back to its default first: a shell that finds it ignored when it starts
# (this test run from a background job, under nohup) can never trap it, and
# start.sh would wait on for a Ctrl-C a terminal would deliver.
set -m
CUMULO_START_LATER=$later CUMULO_START_GATEWAY_PORT=$gw CUMULO_START_ADMIN_PORT=$admin \
    python3 -c 'import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp("bash", ["bash", "start.sh"])' \
    >"$log" 2>&1 &
pid=$!
set +m
started=$SECONDS

# wait_for REGEX SECONDS: until a line of start.sh's output matches
wait_for() {
    local until=$((SECONDS + $2))
    until grep -qE -- "$1" "$log"; do
        kill -0 "$pid" 2>/dev/null || fail "start.sh exited before printing /$1/"
        [ $SECONDS -lt $until ] || fail "no line /$1/ within $2s"
        sleep 0.2
    done
}
line_of() { grep -nE -m1 -- "$1" "$log" | cut -d: -f1; }

wait_for '^\[start\] ready in [0-9]+s: curl ' 300
ready=$((SECONDS - started))
answer=$(curl -fsS --max-time 5 "$base/python.xml?value=42") || fail "the first request was not answered once ready"
[ "$answer" = "<http_test><value>42</value></http_test>" ] || fail "python.xml answered: $answer"
for lang in ${later//,/ }; do
    ! grep -q "http_req/$lang/" target/start/cumulo.toml || fail "$lang is in the core's config; it was to join later"
done

wait_for '^\[start\] summary: ' 240
for lang in ${later//,/ }; do
    joined=$(line_of "^\[start\] $lang: serving /tests/http_req/$lang.xml/get$")
    [ -n "$joined" ] || fail "no line saying $lang serves"
    [ "$joined" -gt "$(line_of '^\[start\] ready in')" ] || fail "$lang joined before the first request was answered"
done
grep -qE '^\[start\] summary: ([0-9]+) of \1 languages serving' "$log" || fail "the summary says a language does not serve"

# Every http_req service of examples/cumulo.toml, as the core has them: as
# many services as there, each subscribed, each answering through the
# gateway; those held back were added through the API (ids after the config's).
patterns=$(python3 - "$admin" "$later" <<'EOF'
import json, sys, tomllib, urllib.request
admin, later = f"http://127.0.0.1:{sys.argv[1]}", sys.argv[2].split(",")
get = lambda p: json.load(urllib.request.urlopen(admin + p, timeout=10))
want = [s for s in tomllib.load(open("examples/cumulo.toml", "rb"))["service"] if s["prefix"] == "/tests/http_req/"]
configured = len(tomllib.load(open("target/start/cumulo.toml", "rb"))["service"])
have = [s for s in get("/v1/services")["services"] if s["prefix"] == "/tests/http_req/"]
assert len(have) == len(want), f"{len(have)} http_req services running, examples/cumulo.toml has {len(want)}"
assert all(s["status"] == "running" for s in have), [(s["program"], s["status"]) for s in have]
for lang in later:
    added = [s for s in have if f"http_req/{lang}/" in s["program"]]
    assert added and all(s["id"] > configured for s in added), f"{lang}: {added} not added through the API"
subs = get("/v1/subscriptions")["subscriptions"]
mine = {x["service_id"] for s in subs for x in s["instances"]}
assert all(s["id"] in mine for s in have), "a service subscribes nothing"
print("\n".join(s["pattern"] for s in subs if s["pattern"].startswith("/tests/http_req/")))
EOF
) || fail "the services of the running core are not examples/cumulo.toml's"
count=0
for p in $patterns; do
    name=${p#/tests/http_req/}
    answer=$(curl -fsS --max-time 5 "$base/${name%/get}?value=42") || fail "$p: no answer through the gateway"
    [ "$answer" = "<http_test><value>42</value></http_test>" ] || fail "$p answered: $answer"
    count=$((count + 1))
done

left=$(descendants "$pid")
kill -INT "$pid"
rc=0
for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && fail "start.sh still runs 30s after SIGINT"
wait "$pid" || rc=$?
[ "$rc" = 0 ] || fail "start.sh exited with $rc after SIGINT (the core's code: 0 expected)"
# (a zombie whose parent exited is as good as gone: init reaps it)
alive() { ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'; }
sleep 1
for p in $left; do
    ! alive "$p" || fail "process $p ($(ps -o args= -p "$p")) outlived start.sh"
done
pid=""
echo "start_test: ready in ${ready}s, $count http_req patterns answered once $later joined, stopped by SIGINT with 0 ($((SECONDS - started))s)"
