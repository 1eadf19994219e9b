#!/bin/sh
# Starts the Erlang http_req example; the core runs this with the CUMULO_* variables set.
# Needs the SDK built (rebar3 compile in sdk/erlang) and http_req.beam (scripts/setup.sh).
here=$(cd "$(dirname "$0")" && pwd)
sdk="$here/../../../sdk/erlang/_build/default/lib/cumulo/ebin"
[ -f "$sdk/cumulo.beam" ] && [ -f "$here/ebin/http_req.beam" ] || {
    echo "run.sh: the Erlang SDK or example is not built; run scripts/setup.sh first" >&2
    exit 1
}
# +sbwt none...: idle schedulers sleep instead of spinning, which on a shared
# machine takes CPU from the other processes (the core among them).
exec erl -noshell -noinput +sbwt none +sbwtdcpu none +sbwtdio none -pa "$sdk" -pa "$here/ebin" -s http_req main
