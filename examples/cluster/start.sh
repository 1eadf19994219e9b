#!/usr/bin/env bash
# Starts a cumulo cloud of 3 nodes on this machine (examples/cluster/README.md):
#   - 3 NATS servers routed into one NATS cluster (client ports 4222-4224,
#     route ports 6222-6224), the messaging the nodes share;
#   - 3 cumulo nodes, a, b and c (node-a.toml .. node-c.toml), each with its
#     own socket, admin port (7311-7313) and services; node a runs the HTTP
#     gateway on 127.0.0.1:8080, and node c alone runs http_req in C and
#     Python.
# Then asks node a's gateway for a service that only node c runs, and prints
# the curl to try. Installs and builds what is missing first (scripts/setup.sh,
# which also installs nats-server). Logs go to target/cluster/. Stop
# everything with Ctrl-C.
#   bash examples/cluster/start.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
case "${1:-}" in
    -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    "") ;;
    *) echo "usage: bash examples/cluster/start.sh" >&2; exit 2 ;;
esac
say() { printf '[cluster] %s\n' "$*"; }

bash "$root/scripts/setup.sh"
nats_server=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$nats_server" ] || { echo "cluster: nats-server not found (scripts/setup.sh installs it: apt-get install nats-server)" >&2; exit 1; }
cumulo=$root/target/release/cumulo
logs=$root/target/cluster
mkdir -p "$logs"

# The ports this example uses must be free: a cumulo started by ./start.sh
# also listens on 8080 and 7311.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in 4222 4223 4224 6222 6223 6224 7311 7312 7313 8080; do
    if port_busy "$port"; then
        echo "cluster: port $port is in use on 127.0.0.1 (another cumulo or nats-server running?); stop it first" >&2
        exit 1
    fi
done

pids=() names=()
stop_all() {  # the nodes first (they drain their requests), then NATS
    trap - EXIT INT TERM
    [ ${#pids[@]} -gt 0 ] || return 0
    say "stopping"
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    say "stopped"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

started() { pids+=("$1"); names+=("$2"); }

wait_until() {  # wait_until SECONDS WHAT TEST...: poll TEST every 0.1 s
    local tries=$(($1 * 10)) what=$2 i j
    shift 2
    for ((i = 0; i < tries; i++)); do
        "$@" && return 0
        for j in "${!pids[@]}"; do
            kill -0 "${pids[j]}" 2>/dev/null || { echo "cluster: ${names[j]} exited; see its log" >&2; return 1; }
        done
        sleep 0.1
    done
    echo "cluster: timed out waiting for $what" >&2
    return 1
}

# --- NATS: 3 servers, each routed to the other two
nats_routes() {  # nats_routes N: the route URLs of the servers other than N
    local out=()
    for m in 1 2 3; do [ "$m" = "$1" ] || out+=("nats://127.0.0.1:$((6221 + m))"); done
    (IFS=,; echo "${out[*]}")
}
for n in 1 2 3; do
    "$nats_server" -a 127.0.0.1 -p $((4221 + n)) -n "nats-$n" \
        -cluster "nats://127.0.0.1:$((6221 + n))" -cluster_name cumulo-example -routes "$(nats_routes $n)" \
        >"$logs/nats-$n.log" 2>&1 &
    started $! "nats-server $n"
done
for n in 1 2 3; do wait_until 10 "nats-server $n on port $((4221 + n))" port_busy $((4221 + n)); done

# --- the 3 cumulo nodes
for node in a b c; do
    "$cumulo" run --config "$here/node-$node.toml" >"$logs/node-$node.log" 2>&1 &
    started $! "cumulo node $node"
done

# Each node logs "node X joined the cloud" when it first hears another: once
# all three know each other, node a's gateway can reach node c's service
# (as soon as node c's subscriptions follow, and its Python processes are up).
knows_all() {
    local node other
    for node in a b c; do
        for other in a b c; do
            [ "$node" = "$other" ] || grep -q "node $other joined" "$logs/node-$node.log" || return 1
        done
    done
}
wait_until 30 "the nodes to find each other over NATS" knows_all
url='http://127.0.0.1:8080/tests/http_req/c.xml?value=42'
answers() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$url" 2>/dev/null)" = 200 ]; }
wait_until 60 "node a's gateway to answer $url" answers

say "started:"
for i in "${!pids[@]}"; do
    case "${names[i]}" in
        "nats-server "*) n=${names[i]#nats-server }
            printf '  %-15s pid %-7s client nats://127.0.0.1:%s, routes on %s, log target/cluster/nats-%s.log\n' \
                "${names[i]}" "${pids[i]}" $((4221 + n)) $((6221 + n)) "$n" ;;
        "cumulo node "*) node=${names[i]#cumulo node }
            printf '  %-15s pid %-7s %s, log target/cluster/node-%s.log\n' "${names[i]}" "${pids[i]}" \
                "$(case $node in
                    a) echo "gateway :8080, http_req Rust, echo; admin :7311" ;;
                    b) echo "http_req Rust, C++; admin :7312" ;;
                    c) echo "http_req C, Python, Python/C; admin :7313" ;;
                esac)" "$node" ;;
    esac
done
echo
say "node a's gateway, asking for a service that only node c runs:"
echo "  \$ curl '$url'"
echo "  $(curl -s "$url")"
echo
echo "Try:"
echo "  curl '$url'          # C, on node c"
echo "  curl 'http://127.0.0.1:8080/tests/http_req/python.xml?value=42'     # Python, on node c"
echo "  curl 'http://127.0.0.1:8080/tests/http_req/cpp.xml?value=42'        # C++, on node b"
echo "  curl 'http://127.0.0.1:8080/tests/http_req/rust.xml?value=42'       # Rust, on a and b: a answers (closest)"
echo "  target/release/cumulo nodes -c examples/cluster/node-a.toml          # the cloud, as node a sees it"
echo "  target/release/cumulo services list -c examples/cluster/node-c.toml # node c's services"
echo "Ctrl-C stops the nodes and the NATS servers."

# Run until Ctrl-C. A process that stops meanwhile (a node you stopped to
# see the others carry on) is reported; the rest keep running.
set +e
alive=("${pids[@]}")
while [ ${#alive[@]} -gt 0 ]; do
    wait -n -p gone "${alive[@]}"
    status=$?
    for i in "${!pids[@]}"; do
        [ "${pids[i]}" = "${gone:-}" ] && echo "cluster: ${names[i]} (pid $gone) stopped, exit status $status; the others keep running (Ctrl-C stops them)" >&2
    done
    still=()
    for pid in "${alive[@]}"; do [ "$pid" = "${gone:-}" ] || still+=("$pid"); done
    alive=("${still[@]}")
done
echo "cluster: every process has stopped" >&2
