#!/bin/sh
# Lints the Perl SDK and its http_req example with perlcritic (.perlcriticrc),
# then runs its test suite with prove (perl and its core modules only).
set -eu
cd "$(dirname "$0")"

apt_install() {
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$@" >/dev/null; }
}

command -v perl >/dev/null 2>&1 || apt_install perl
command -v prove >/dev/null 2>&1 || apt_install perl
command -v perlcritic >/dev/null 2>&1 || apt_install libperl-critic-perl

perlcritic --quiet --profile .perlcriticrc lib t ../../examples/http_req/perl

exec prove -l t
