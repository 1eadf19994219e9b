#!/usr/bin/env bash
# Runs the Java SDK's test suite, then installs the SDK and compiles the Java http_req example,
# all with javac's lint on and its warnings as errors (-Xlint:all -Werror, pom.xml).
# Installs a JDK and Maven first when they are missing. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

java_major() {
    javac -version 2>&1 | sed -n 's/^javac \([0-9][0-9]*\).*/\1/p'
}

missing=()
if ! command -v javac >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
    missing+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    if [ "$(java_major)" -lt 17 ]; then
        # An older default JDK stays first in PATH: point at the one just installed.
        export JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
        export PATH="$JAVA_HOME/bin:$PATH"
    fi
fi

mvn_quiet=(mvn -q -B -Dstyle.color=never)

# Maven -q hides Surefire's own summary: total its reports instead.
print_summary() {
    local reports=(target/surefire-reports/*.txt)
    [ -e "${reports[0]}" ] || return 0
    grep -h '^Tests run:' "${reports[@]}" | awk -F'[:,] *' '
        { run += $2; failures += $4; errors += $6; skipped += $8 }
        END {
            printf "Tests run: %d, Failures: %d, Errors: %d, Skipped: %d\n", run, failures, errors, skipped
            printf "java: %d passed, %d failed, %d skipped\n", run - failures - errors - skipped, failures + errors, skipped
        }'
}

rm -rf target/surefire-reports
status=0
# install runs verify (the test suite) first and installs only if it passes.
# (Maven 3.8 prints stray colour resets even when quiet; strip them.)
"${mvn_quiet[@]}" install 2>&1 | sed 's/\x1b\[[0-9;]*m//g' || status=$?
print_summary
[ "$status" -eq 0 ] || exit "$status"

example=../../examples/http_req/java
javac -Xlint:all -Werror -d "$example/target" -cp target/cumulo-0.1.0.jar "$example/HttpReq.java"
