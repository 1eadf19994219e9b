#!/bin/sh
# Starts the Java http_req example; the core runs this with the CUMULO_* variables set.
# Uses the classes compiled by sdk/java/test.sh when present, else runs the source directly.
set -e
here=$(cd "$(dirname "$0")" && pwd)
sdk_jar=$(ls "$here"/../../../sdk/java/target/cumulo-*.jar 2>/dev/null | grep -v -e sources -e javadoc | head -n 1)
if [ -z "$sdk_jar" ]; then
    echo "run.sh: the cumulo Java SDK is not built; run sdk/java/test.sh first" >&2
    exit 1
fi
if [ -f "$here/target/HttpReq.class" ] && [ "$here/target/HttpReq.class" -nt "$here/HttpReq.java" ]; then
    exec java -cp "$sdk_jar:$here/target" HttpReq "$@"
fi
exec java -cp "$sdk_jar" "$here/HttpReq.java" "$@"
