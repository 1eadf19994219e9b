#!/bin/sh
# Checks every Ruby file of the SDK and its http_req example with ruby -wc
# (syntax, with warnings as failures), then runs the SDK's test suite;
# installs ruby and minitest when missing.
set -eu
cd "$(dirname "$0")"

apt_install() {
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$@" >/dev/null; }
}

command -v ruby >/dev/null 2>&1 || apt_install ruby
ruby -e 'require "minitest"' >/dev/null 2>&1 || apt_install ruby-minitest

# ruby -wc prints warnings but exits 0 on them: any output but "Syntax OK" fails.
lint=$(find lib test ../../examples/http_req/ruby -name '*.rb' -exec ruby -wc {} \; 2>&1 | grep -v '^Syntax OK$' || true)
if [ -n "$lint" ]; then
    printf '%s\n' "$lint" >&2
    echo "test.sh: ruby -wc reported the above" >&2
    exit 1
fi

exec ruby -w -Ilib -Itest -e 'Dir["test/*_test.rb"].sort.each { |file| require File.expand_path(file) }'
