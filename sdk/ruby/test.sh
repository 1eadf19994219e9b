#!/bin/sh
# Runs the Ruby SDK's test suite, installing ruby and minitest when missing.
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

exec ruby -w -Ilib -Itest -e 'Dir["test/*_test.rb"].sort.each { |file| require File.expand_path(file) }'
