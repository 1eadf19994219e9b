#!/usr/bin/env bash
# The Debian package, end to end, without installing it on this machine:
# builds it from target/release/cumulo (as built by scripts/setup.sh; not
# rebuilt here), checks its metadata and contents, extracts it into a
# scratch root, and runs the packaged binary with the packaged config (its
# /run and /var/lib paths moved into the scratch folder, free ports): echo
# must answer through the gateway, and SIGTERM must stop the core with exit
# status 0. Then the unit (systemd-analyze verify, where there is one), the
# completion scripts and man pages. About 15 s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/cumulo-deb-test.XXXXXX")
core_pid=""
cleanup() {
    [ -n "$core_pid" ] && kill -KILL "$core_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# --- build
deb=$(bash packaging/deb/build.sh --no-build --out "$scratch/out" | tail -n 1) || fail "packaging/deb/build.sh failed"
[ -f "$deb" ] || fail "build.sh made no package"
ok "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

# --- metadata
info=$(dpkg-deb --info "$deb")
version=$(target/release/cumulo --version | awk '{ print $2 }')
field() { printf '%s\n' "$info" | sed -n "s/^ $1: //p"; }
[ "$(field Package)" = cumulo ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), the binary says $version"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
[[ "$(field Depends)" == *libc6* ]] || fail "Depends names no libc6: $(field Depends)"
[ -n "$(field Description)" ] || fail "no Description"
ok "control: cumulo $version $(field Architecture), Depends: $(field Depends)"

dpkg-deb --control "$deb" "$scratch/control"
[ "$(cat "$scratch/control/conffiles")" = /etc/cumulo/cumulo.toml ] ||
    fail "conffiles: $(cat "$scratch/control/conffiles")"
for script in postinst prerm postrm; do
    [ -x "$scratch/control/$script" ] || fail "$script missing or not executable"
    sh -n "$scratch/control/$script" || fail "$script: syntax error"
done
grep -q 'adduser --system --group --no-create-home' "$scratch/control/postinst" ||
    fail "postinst creates no system user"
ok "conffiles: /etc/cumulo/cumulo.toml; postinst, prerm, postrm"

# The maintainer scripts, for real but out of this machine's way: in a mount
# namespace where /etc, /var/lib and /run are scratch copies (root only).
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    mkdir "$scratch/ns"
    cp -a /etc "$scratch/ns/etc"
    sed -i '/^cumulo:/d' "$scratch"/ns/etc/{passwd,group,shadow,gshadow} 2>/dev/null || true
    scripts=$(unshare -m sh -ec '
        mount --bind "$1/ns/etc" /etc
        mkdir "$1/ns/lib" "$1/ns/run"
        mount --bind "$1/ns/lib" /var/lib
        mount --bind "$1/ns/run" /run
        mkdir /etc/cumulo
        cp "$2" /etc/cumulo/cumulo.toml
        "$1/control/postinst" configure
        "$1/control/postinst" configure 0.0.9          # an upgrade: the user exists already
        getent passwd cumulo | cut -d: -f1,6,7
        stat -c "%U:%G %a %n" /etc/cumulo /etc/cumulo/cumulo.toml /var/lib/cumulo
        "$1/control/prerm" remove
        "$1/control/postrm" remove
        [ -f /etc/cumulo/cumulo.toml ] && echo "remove keeps the config"
        "$1/control/postrm" purge
        [ ! -e /etc/cumulo ] && [ ! -e /var/lib/cumulo ] && echo "purge removes the config and the data"
    ' sh "$scratch" "$root/packaging/deb/cumulo.toml" 2>&1) || fail "maintainer scripts: $scripts"
    expected="cumulo:/var/lib/cumulo:/usr/sbin/nologin
root:cumulo 750 /etc/cumulo
root:cumulo 640 /etc/cumulo/cumulo.toml
cumulo:cumulo 750 /var/lib/cumulo
remove keeps the config
purge removes the config and the data"
    [ "$scripts" = "$expected" ] || fail "maintainer scripts said:
$scripts
expected:
$expected"
    ok "postinst (twice), prerm, postrm remove and purge: user cumulo, config root:cumulo 640"
else
    echo "skipped: the maintainer scripts (they need root and unshare -m)"
fi

# --- contents: every file where Debian looks for it, owned by root
contents=$(dpkg-deb --contents "$deb")
for path in /usr/bin/cumulo /etc/cumulo/cumulo.toml /lib/systemd/system/cumulo.service \
    /usr/share/man/man1/cumulo.1.gz /usr/share/man/man1/cumulo-run.1.gz \
    /usr/share/man/man1/cumulo-services-add.1.gz \
    /usr/share/bash-completion/completions/cumulo /usr/share/zsh/vendor-completions/_cumulo \
    /usr/share/fish/vendor_completions.d/cumulo.fish /usr/share/doc/cumulo/copyright; do
    printf '%s\n' "$contents" | grep -q " \.$path\$" || fail "$path is not in the package"
done
printf '%s\n' "$contents" | awk '$2 != "root/root" { bad = 1; print "not root/root: " $0 } END { exit bad }' ||
    fail "files not owned by root"
printf '%s\n' "$contents" | grep -q '^-rwxr-xr-x .* \./usr/bin/cumulo$' || fail "/usr/bin/cumulo is not mode 755"
ok "contents: binary, conffile, unit, $(printf '%s\n' "$contents" | grep -c '\.1\.gz$') man pages, 3 completions, copyright"

# --- the packaged binary and config, in a scratch root
sysroot="$scratch/root"
dpkg-deb -x "$deb" "$sysroot"
bin="$sysroot/usr/bin/cumulo"
if command -v readelf >/dev/null 2>&1; then
    ! readelf -S "$bin" | grep -q '\.debug_info' || fail "the packaged binary keeps its debug info"
fi
checked=$("$bin" check --config "$sysroot/etc/cumulo/cumulo.toml") || fail "cumulo check refuses the packaged config"
[[ "$checked" == *"valid (2 services)"* ]] || fail "cumulo check: $checked"
ok "cumulo check: $checked"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
gateway_port=$(free_port)
admin_port=$(free_port)
while [ "$admin_port" = "$gateway_port" ]; do admin_port=$(free_port); done
config="$scratch/cumulo.toml"
sed -e "s|\"/run/cumulo/|\"$scratch/run/cumulo/|; s|\"/var/lib/cumulo/|\"$scratch/var/lib/cumulo/|" \
    -e "s|^port = 8080|port = $gateway_port|; s|^port = 7311|port = $admin_port|" \
    "$sysroot/etc/cumulo/cumulo.toml" >"$config"
grep -q "^socket = \"$scratch/run/cumulo/cumulo.sock\"" "$config" || fail "the socket path was not moved"
grep -q "^port = $gateway_port" "$config" && grep -q "^port = $admin_port" "$config" || fail "the ports were not moved"

"$bin" run --config "$config" >"$scratch/core.log" 2>&1 &
core_pid=$!
answer=""
for _ in $(seq 200); do
    answer=$(curl -s --max-time 2 -d 'hello from the package' "http://127.0.0.1:$gateway_port/echo/deb" || true)
    [ -n "$answer" ] && break
    kill -0 "$core_pid" 2>/dev/null || { cat "$scratch/core.log" >&2; fail "the core exited"; }
    sleep 0.1
done
[[ "$answer" == *"hello from the package"* ]] || { cat "$scratch/core.log" >&2; fail "echo through the gateway answered: $answer"; }
ok "echo answered through the gateway on 127.0.0.1:$gateway_port"
[ -S "$scratch/run/cumulo/cumulo.sock" ] || fail "no socket at the configured path"
status=$(curl -s --max-time 2 "http://127.0.0.1:$admin_port/metrics" | grep -c '^cumulo_' || true)
[ "$status" -gt 0 ] || fail "the admin API on port $admin_port served no metrics"
ok "admin API on 127.0.0.1:$admin_port"

# What ExecReload runs: `cumulo reload`, here after adding a service to the
# file (the admin address given as a drop-in would).
printf '\n[[service]]\nprefix = "/added/"\ninternal = "echo"\n' >>"$config"
reloaded=$(CUMULO_ADMIN="http://127.0.0.1:$admin_port" "$bin" reload) || { cat "$scratch/core.log" >&2; fail "cumulo reload: $reloaded"; }
[[ "$reloaded" == *"+ add /added/ (internal echo)"* ]] || fail "cumulo reload said: $reloaded"
answer=""
for _ in $(seq 100); do
    answer=$(curl -s --max-time 2 -d 'after the reload' "http://127.0.0.1:$gateway_port/added/x" || true)
    [[ "$answer" == *"after the reload"* ]] && break
    sleep 0.1
done
[[ "$answer" == *"after the reload"* ]] || { cat "$scratch/core.log" >&2; fail "the service added by reload answered: $answer"; }
ok "cumulo reload: a service added to the file answers"

kill -TERM "$core_pid"
rc=0
wait "$core_pid" || rc=$?
core_pid=""
[ $rc = 0 ] || { cat "$scratch/core.log" >&2; fail "the core exited $rc after SIGTERM"; }
ok "SIGTERM: the core stopped, exit status 0"

# --- the unit
unit="$sysroot/lib/systemd/system/cumulo.service"
for line in User=cumulo Group=cumulo "ExecStart=/usr/bin/cumulo run --config /etc/cumulo/cumulo.toml" \
    "ExecReload=/usr/bin/cumulo reload" RuntimeDirectory=cumulo StateDirectory=cumulo \
    ProtectSystem=strict KillMode=mixed Restart=on-failure; do
    grep -qx "$line" "$unit" || fail "the unit has no $line"
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # A copy naming the scratch root's binary (verify wants ExecStart's
    # program to exist); --man=no: the man pages are not installed here.
    mkdir "$scratch/unit"
    sed "s|/usr/bin/cumulo|$bin|g" "$unit" >"$scratch/unit/cumulo.service"
    verified=$(systemd-analyze verify --man=no "$scratch/unit/cumulo.service" 2>&1) ||
        fail "systemd-analyze verify: $verified"
    [ -z "$verified" ] || fail "systemd-analyze verify warns: $verified"
    ok "systemd-analyze verify: no complaint"
else
    echo "skipped: systemd-analyze verify (no systemd-analyze on this machine)"
fi

# --- completions and man pages name every subcommand (from --help)
commands=$("$bin" --help | awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }' | grep -vx help)
[ "$(printf '%s\n' "$commands" | wc -l)" -ge 10 ] || fail "--help lists too few commands: $commands"
bash_script=$("$bin" completions bash)
# (roff writes a hyphen as \-)
man_page=$("$bin" man | sed 's/\\-/-/g')
mkdir "$scratch/man"
"$bin" man --out-dir "$scratch/man"
for c in $commands; do
    grep -qw -- "$c" <<<"$bash_script" || fail "the bash completion does not name $c"
    grep -qw -- "$c" <<<"$man_page" || fail "the man page does not name $c"
    [ -s "$scratch/man/cumulo-$c.1" ] || fail "no man page cumulo-$c.1"
done
bash -n <(printf '%s\n' "$bash_script") || fail "the bash completion is not valid bash"
[[ "$man_page" == *'.TH cumulo 1'* ]] || fail "cumulo man wrote no man page header"
for shell in zsh fish elvish powershell; do
    [ -n "$("$bin" completions "$shell")" ] || fail "cumulo completions $shell wrote nothing"
done
ok "completions (bash, zsh, fish, elvish, powershell) and man pages name: $(echo $commands)"
echo "deb package: all checks passed"
