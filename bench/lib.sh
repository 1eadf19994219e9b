# Helpers shared by the bench/* scripts: source it, after `set -euo pipefail`.
#   . "$(dirname "$0")/lib.sh"
# It defines the array `pids` (processes to stop) and the functions below;
# it sets no trap itself: a script calls bench_traps once its work folder is set.

pids=()

# bench_help SCRIPT: print the script's header comment (its --help).
bench_help() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$1"; }

# bench_lock NAME: one benchmark at a time on this machine. Two at once
# would each measure the other's load; the second waits for the first.
bench_lock() {
    exec 9>/tmp/cumulo-bench.lock
    if ! flock -n 9; then
        echo "$1: waiting for another benchmark to finish (/tmp/cumulo-bench.lock)" >&2
        flock 9
    fi
}

# bench_build: the workspace as scripts/setup.sh builds it, which is what
# `bash start.sh` runs; a `-p` build would resolve other dependency
# features and build the core a second time.
# CUMULO_BENCH_PREBUILT=1 measures the binaries already in target/release
# (after test.sh, say, whose build also holds the tests' dependency features).
bench_build() {
    [ -n "${CUMULO_BENCH_PREBUILT:-}" ] && return 0
    cargo build --release --quiet --workspace --manifest-path "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml"
}

# bench_apt_install PROGRAM=PACKAGE...: install the Debian package of each
# program that is missing (quietly; apt-get update only if the first try fails).
bench_apt_install() {
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%=*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%=*}" ] || missing+=("${pair#*=}")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; }
}

# stop_all: stop every process in `pids`, the last started first, and reap them.
stop_all() {
    local i pid
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    pids=()
}

# bench_traps WORK: on exit stop everything and remove WORK; Ctrl-C exits.
bench_traps() {
    bench_work=$1
    trap 'stop_all; rm -rf "$bench_work"' EXIT
    trap 'exit 130' INT TERM
}

# wait_for TEST...: up to 10 s for a condition, polled every 0.1 s.
wait_for() {
    local _
    for _ in $(seq 100); do "$@" && return 0; sleep 0.1; done
    echo "timed out waiting for: $*" >&2
    return 1
}

# free_port: a TCP port free on 127.0.0.1 just now.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# port_open PORT: something accepts connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_http_ok URL: up to 20 s until URL answers 200.
wait_http_ok() {
    local _
    for _ in $(seq 200); do
        # BENCH_CA: the CA of an https URL's certificate (--tls runs).
        [ "$(curl -s ${BENCH_CA:+--cacert "$BENCH_CA"} -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" = 200 ] && return 0
        sleep 0.1
    done
    echo "no 200 from $1" >&2
    return 1
}

# median: the median of the numbers on stdin, one per line (0 if none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# to_ms LATENCY: a latency as wrk prints it ("850.00us", "2.63ms", "1.02s"), in ms.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.2f", v * 1000 }
        else print "?" }'
}

# start_static_nginx DIR PORT [CONNECTIONS]: nginx answering every request
# with the http_req XML itself (bench/gateway/nginx.conf), run in DIR on
# PORT, the master added to `pids`; returns once it answers (exits with its
# logs if it does not). With CONNECTIONS, each worker may hold that many
# and the listen backlog is the gateway's (4096), not nginx's 511, for the
# opening burst. With BENCH_TLS_DIR (server.pem, server.key, ca.pem from
# tests/tls/make_certs.sh), it serves HTTPS with that certificate, TLS 1.2
# and 1.3, as the gateway does.
start_static_nginx() {
    local dir=$1 port=$2 conns=${3:-} bin raise=() tls=() scheme=http
    bin=$(command -v nginx || echo /usr/sbin/nginx)
    mkdir -p "$dir"
    if [ -n "$conns" ]; then
        raise=(-e "s|worker_connections 4096;|worker_connections $((conns + 100));|"
            -e "s|^worker_processes auto;|worker_processes auto;\nworker_rlimit_nofile $((conns + 100));|"
            -e "s|listen 127.0.0.1:$port;|listen 127.0.0.1:$port backlog=4096;|")
    fi
    if [ -n "${BENCH_TLS_DIR:-}" ]; then
        scheme=https
        tls=(-e "s|listen 127.0.0.1:$port\([^;]*\);|listen 127.0.0.1:$port\1 ssl;\n        ssl_certificate $BENCH_TLS_DIR/server.pem;\n        ssl_certificate_key $BENCH_TLS_DIR/server.key;\n        ssl_protocols TLSv1.2 TLSv1.3;|")
    fi
    sed -e "s|@WORK@|$dir|g" -e "s|@PORT@|$port|g" "${raise[@]}" "${tls[@]}" "$root/bench/gateway/nginx.conf" >"$dir/nginx.conf"
    "$bin" -p "$dir" -c "$dir/nginx.conf" -e "$dir/nginx-error.log" 2>"$dir/stderr" &
    pids+=($!)
    BENCH_CA=${BENCH_TLS_DIR:+$BENCH_TLS_DIR/ca.pem} wait_http_ok "$scheme://127.0.0.1:$port/tests/http_req/rust.xml?value=42" ||
        { cat "$dir/stderr" "$dir/nginx-error.log" >&2; exit 1; }
}

# fit_open_files VAR MARGIN NAME: every connection is a descriptor in the
# client and in the server, each a process of its own. Raises this shell's
# soft open-files limit (inherited by what it starts) to the hard one; if
# that is below $VAR + MARGIN, lowers VAR (a count of connections) to fit
# and says so as NAME.
fit_open_files() {
    local -n fit_count=$1
    local margin=$2 name=$3 hard
    hard=$(ulimit -Hn)
    if [ "$hard" = unlimited ]; then
        ulimit -Sn $((fit_count + 1000))
        return
    fi
    ulimit -Sn "$hard"
    if [ $((fit_count + margin)) -gt "$hard" ]; then
        echo "$name: the hard open-files limit is $hard per process: $((hard - margin)) connections instead of $fit_count" >&2
        fit_count=$((hard - margin))
    fi
}

# cpu_ticks PID...: user + system clock ticks (all threads) of the
# processes, summed; a process that is gone counts 0.
cpu_ticks() {
    local pid total=0 t
    for pid in "$@"; do
        # Fields 14 and 15 counted after the command name, which is in
        # parentheses and may hold spaces.
        t=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{ print $12 + $13 }') || t=0
        total=$((total + ${t:-0}))
    done
    echo "$total"
}
clock_ticks=$(getconf CLK_TCK)

# machine_line: the machine and the time, for a report's header.
machine_line() {
    local cpu
    cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
    echo "machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(free -g | awk '/Mem:/ {print $2}') GiB, Linux $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC')"
}

# --- Spreads: what a repeated figure is made of -------------------------
# A figure measured N times is quoted as its median only with its spread:
# min / median / max over the runs. When max/min is above
# BENCH_UNSETTLED_RATIO (1.3) the runs disagree by more than any change
# worth reporting, and the figure is flagged "unsettled": measure it again
# on a quieter machine rather than quote the median (docs/BENCHMARKS.md).
BENCH_UNSETTLED_RATIO=1.3

# (median, above, is the middle of the same numbers.)

# spread: the numbers on stdin, one per line, as "N MIN MEDIAN MAX RATIO
# FLAG", FLAG "unsettled" or "settled" (a single run, or none, is "settled"
# with ratio 1; a minimum of 0 with a larger maximum is "unsettled").
spread() {
    sort -g | awk -v limit="$BENCH_UNSETTLED_RATIO" '
        NF { v[++n] = $1 }
        END {
            if (n == 0) { print "0 0 0 0 1.00 settled"; exit }
            med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            if (v[1] > 0) ratio = v[n] / v[1]; else ratio = (v[n] > 0) ? 1e9 : 1
            printf "%d %s %s %s %.2f %s\n", n, v[1], med, v[n], ratio, (ratio > limit) ? "unsettled" : "settled"
        }'
}

# spread_line LABEL UNIT: the numbers on stdin as one line of a report:
#   "LABEL: min 9.1 / median 10.0 / max 10.4 UNIT over 3 runs (max/min 1.14)"
# with ": UNSETTLED" at the end when they disagree.
spread_line() {
    local n min med max ratio flag
    read -r n min med max ratio flag <<<"$(spread)"
    printf '%s: min %.1f / median %.1f / max %.1f %s over %d runs (max/min %s)%s\n' "$1" "$min" "$med" "$max" "$2" "$n" \
        "$([ "$ratio" = 1000000000.00 ] && echo "inf" || echo "$ratio")" \
        "$([ "$flag" = unsettled ] && echo ": UNSETTLED, the median is not a figure")"
}

# unsettled: true when the numbers on stdin are unsettled.
unsettled() { [ "$(spread | cut -d' ' -f6)" = unsettled ]; }

# --- The http_req example in every language ------------------------------
# http_req_launch LANG: the [[service]] lines that start that language's
# http_req example (as in examples/cumulo.toml); fails when the language is
# not built here (bash scripts/setup.sh). Needs `root` (the checkout).
http_req_launch() {
    local ex=$root/examples/http_req
    case "$1" in
        rust) [ -x "$root/target/release/http_req" ] && echo "path = \"$root/target/release/http_req\"" ;;
        # Written against CloudI's own APIs, run unchanged (docs/CLOUDI.md).
        rust_cloudi)
            [ -x "$root/target/release/http_req_cloudi" ] &&
                printf 'path = "%s"\nprotocol = "cloudi"\n' "$root/target/release/http_req_cloudi" ;;
        python_cloudi)
            "$root/sdk/python/.venv/bin/python" -c 'import cloudi' 2>/dev/null &&
                printf 'path = "%s"\nargs = ["%s"]\nprotocol = "cloudi"\n' "$root/sdk/python/.venv/bin/python" "$ex/$1/http_req.py" ;;
        javascript_cloudi)
            command -v node >/dev/null && [ -d "$ex/$1/node_modules/cloudi" ] &&
                printf 'path = "node"\nargs = ["%s"]\nprotocol = "cloudi"\n' "$ex/$1/http_req.js" ;;
        c | cpp) [ -x "$ex/$1/build/http_req" ] && echo "path = \"$ex/$1/build/http_req\"" ;;
        python | python_c)
            [ -x "$root/sdk/python/.venv/bin/python" ] &&
                printf 'path = "%s"\nargs = ["%s"]\n' "$root/sdk/python/.venv/bin/python" "$ex/$1/http_req.py" ;;
        go) [ -x "$ex/go/.bin/http_req" ] && echo "path = \"$ex/go/.bin/http_req\"" ;;
        java)
            ls "$root"/sdk/java/target/cumulo-*.jar >/dev/null 2>&1 && command -v java >/dev/null &&
                printf 'path = "sh"\nargs = ["%s"]\n' "$ex/java/run.sh" ;;
        javascript) command -v node >/dev/null && printf 'path = "node"\nargs = ["%s"]\n' "$ex/javascript/http_req.mjs" ;;
        # Ruby with its JIT where it has one (3.1+): the window-1 service took
        # 64 us of CPU per request against 75 without (sdk/ruby/README.md).
        # Ruby 3.1's YJIT fills all of its code memory up front (256 MiB by
        # default, 273 MB RSS per process here); 16 MiB holds this service.
        ruby)
            command -v ruby >/dev/null || return 1
            local jit=""
            ruby --yjit --yjit-exec-mem-size=16 -e 0 >/dev/null 2>&1 && jit='"--yjit", "--yjit-exec-mem-size=16", '
            printf 'path = "ruby"\nargs = [%s"%s"]\n' "$jit" "$ex/ruby/http_req.rb" ;;
        php) command -v php >/dev/null && printf 'path = "php"\nargs = ["%s"]\n' "$ex/php/http_req.php" ;;
        perl) command -v perl >/dev/null && printf 'path = "perl"\nargs = ["%s"]\n' "$ex/perl/http_req.pl" ;;
        haskell) [ -x "$ex/haskell/.bin/http_req" ] && echo "path = \"$ex/haskell/.bin/http_req\"" ;;
        erlang)
            [ -f "$ex/erlang/ebin/http_req.beam" ] && command -v erl >/dev/null &&
                printf 'path = "sh"\nargs = ["%s"]\n' "$ex/erlang/run.sh" ;;
        ocaml) [ -x "$ex/ocaml/_build/default/http_req.exe" ] && echo "path = \"$ex/ocaml/_build/default/http_req.exe\"" ;;
        ats2) [ -x "$ex/ats2/build/http_req" ] && echo "path = \"$ex/ats2/build/http_req\"" ;;
        *) return 1 ;;
    esac
}

# http_req_service LANG PROCESSES THREADS WINDOW: the whole [[service]]
# block of that language's http_req (prefix /tests/http_req/); WINDOW is
# HTTP_REQ_WINDOW, the requests the core may deliver to an instance at once;
# Go's GOMAXPROCS is THREADS.
# The Python row is the pure-Python SDK; Python/C the same handler on its C
# extension. Fails like http_req_launch.
http_req_service() {
    local lines pure=0
    lines=$(http_req_launch "$1") || return 1
    [ "$1" = python ] && pure=1
    printf '[[service]]\nprefix = "/tests/http_req/"\n%s\ncount_process = %s\ncount_thread = %s\ntimeout_init = 60000\n' \
        "$lines" "$2" "$3"
    # Go: one P per service thread (sdk/go/README.md): Go's default of one
    # per CPU in each process oversubscribes the CPUs count_process times.
    local go=""
    [ "$1" = go ] && go="GOMAXPROCS = \"$3\", "
    echo "env = { ${go}HTTP_REQ_WINDOW = \"$4\", CUMULO_PURE_PYTHON = \"$pure\" }"
}

# http_req_windowed LANG: the language's example reads HTTP_REQ_WINDOW (its
# SDK may take several requests at once).
http_req_windowed() {
    case "$1" in rust | c | ats2 | erlang | haskell | javascript | ocaml | python | python_c | go | ruby | perl | php | cpp | java) return 0 ;; *) return 1 ;; esac
}

# http_req_cloudi_api LANG: the example is on a CloudI API (its launch
# lines say protocol = "cloudi"), which serves one request at a time per
# thread: its concurrency is count_thread, not a window.
http_req_cloudi_api() {
    # (grep reads all of it: no -q, whose early exit could fail the pipe under pipefail)
    http_req_launch "$1" 2>/dev/null | grep -x 'protocol = "cloudi"' >/dev/null
}

# http_req_label LANG: the language's name in a report (python_c: Python/C).
http_req_label() {
    case "$1" in
        rust) echo Rust ;; rust_cloudi) echo Rust/CloudI ;; python_cloudi) echo Python/CloudI ;; c) echo C ;; cpp) echo C++ ;;
        python) echo Python ;; python_c) echo Python/C ;; go) echo Go ;; java) echo Java ;; javascript) echo JavaScript ;;
        javascript_cloudi) echo JavaScript/CloudI ;; ruby) echo Ruby ;; php) echo PHP ;; perl) echo Perl ;;
        erlang) echo Erlang ;; ocaml) echo OCaml ;; haskell) echo Haskell ;; ats2) echo ATS2 ;; *) echo "$1" ;;
    esac
}
