#!/bin/sh
# Checks every PHP file of the SDK and its http_req example with php -l, then
# runs the SDK's test suite; installs php-cli and PHPUnit when missing.
set -eu
cd "$(dirname "$0")"

apt_install() {
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$@" >/dev/null; }
}

command -v php >/dev/null 2>&1 || apt_install php-cli
command -v phpunit >/dev/null 2>&1 || apt_install phpunit
# The fake core of the session tests runs in a forked process.
php -r 'exit(function_exists("pcntl_fork") && function_exists("posix_kill") ? 0 : 1);' ||
    { echo "test.sh: PHP lacks pcntl/posix (php-cli provides them)" >&2; exit 1; }

find . ../../examples/http_req/php -name '*.php' | while read -r file; do
    php -l "$file" >/dev/null || { echo "test.sh: php -l failed on $file" >&2; exit 1; }
done

exec phpunit --configuration phpunit.xml
