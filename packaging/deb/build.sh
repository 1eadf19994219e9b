#!/usr/bin/env bash
# Builds the Debian package of cumulo from this workspace:
#   bash packaging/deb/build.sh [--out DIR] [--no-build]
# DIR (default target/deb) gets cumulo_<version>_<arch>.deb, and its path
# is the last line printed. --no-build packages target/release/cumulo as it
# is (it must exist) instead of running `cargo build --release -p cumulo`.
#
# Staged by hand and built with `dpkg-deb --build --root-owner-group`: every
# Debian has dpkg-deb, while cargo-deb would be one more tool to install
# (and build) on each machine, for a package of a dozen files.
# docs/OPERATIONS.md lists what the package holds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/target/deb"
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h | --help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument $1 (--out DIR, --no-build)" >&2; exit 2 ;;
    esac
done
say() { printf '[deb] %s\n' "$*" >&2; }

bin="$root/target/release/cumulo"
[ $build = 1 ] && (cd "$root" && cargo build --release -p cumulo --quiet)
[ -x "$bin" ] || { echo "build.sh: $bin is missing (build it, or drop --no-build)" >&2; exit 1; }

# The version of [workspace.package] in Cargo.toml, which the binary must
# report too: a stale binary is refused rather than packaged under a new name.
version=$(awk '/^\[/ { ws = ($0 == "[workspace.package]") } ws && /^version *=/ { gsub(/[" ]/, "", $0); sub(/^version=/, ""); print; exit }' "$root/Cargo.toml")
[ -n "$version" ] || { echo "build.sh: no version in [workspace.package] of Cargo.toml" >&2; exit 1; }
bin_version=$("$bin" --version | awk '{ print $2 }')
[ "$bin_version" = "$version" ] ||
    { echo "build.sh: $bin is version $bin_version, the workspace $version: rebuild it" >&2; exit 1; }
arch=$(dpkg --print-architecture)

stage=$(mktemp -d "${TMPDIR:-/tmp}/cumulo-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
pkg="$stage/cumulo_${version}_${arch}"
install -d -m 755 "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/etc/cumulo" "$pkg/lib/systemd/system" \
    "$pkg/usr/share/man/man1" "$pkg/usr/share/doc/cumulo" \
    "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
    "$pkg/usr/share/fish/vendor_completions.d"

# The release profile keeps line tables for profiling (debug = 1): the
# installed copy goes without them, and is a fraction of the size.
strip --strip-debug -o "$pkg/usr/bin/cumulo" "$bin"
chmod 755 "$pkg/usr/bin/cumulo"
install -m 644 "$here/cumulo.toml" "$pkg/etc/cumulo/cumulo.toml"
install -m 644 "$here/cumulo.service" "$pkg/lib/systemd/system/cumulo.service"

# Man pages and completions, from the binary's own clap definitions.
"$pkg/usr/bin/cumulo" man --out-dir "$pkg/usr/share/man/man1"
gzip -9n "$pkg"/usr/share/man/man1/*.1
chmod 644 "$pkg"/usr/share/man/man1/*.gz
"$pkg/usr/bin/cumulo" completions bash >"$pkg/usr/share/bash-completion/completions/cumulo"
"$pkg/usr/bin/cumulo" completions zsh >"$pkg/usr/share/zsh/vendor-completions/_cumulo"
"$pkg/usr/bin/cumulo" completions fish >"$pkg/usr/share/fish/vendor_completions.d/cumulo.fish"

install -m 644 "$here/copyright" "$pkg/usr/share/doc/cumulo/copyright"
for doc in CONFIG OPERATIONS; do
    gzip -9n <"$root/docs/$doc.md" >"$pkg/usr/share/doc/cumulo/$doc.md.gz"
done

install -m 755 "$here/postinst" "$here/prerm" "$here/postrm" "$pkg/DEBIAN/"
echo /etc/cumulo/cumulo.toml >"$pkg/DEBIAN/conffiles"

# Depends: the shared libraries the binary links, as dpkg-shlibdeps (Debian's
# dpkg-dev) names them; without it, the libraries a Rust binary on glibc
# links (libc, libm: libc6; unwinding: libgcc-s1).
if command -v dpkg-shlibdeps >/dev/null 2>&1; then
    mkdir -p "$stage/debian" && touch "$stage/debian/control"
    depends=$(cd "$stage" && dpkg-shlibdeps -O "$pkg/usr/bin/cumulo" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
fi
depends=${depends:-"libc6 (>= 2.34), libgcc-s1"}
maintainer=${CUMULO_DEB_MAINTAINER:-"cumulo developers <cumulo@localhost>"}
cat >"$pkg/DEBIAN/control" <<EOF
Package: cumulo
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
Depends: $depends
Section: net
Priority: optional
Description: polyglot service cloud: the core daemon and its CLI
 cumulo starts services written in any language (SDKs for 14), routes
 requests between them by name, restarts them when they die, and serves
 them to the web through its HTTP gateway.
 .
 This package installs the cumulo binary, a systemd unit running it as the
 user cumulo with /etc/cumulo/cumulo.toml, man pages and shell completions.
EOF

mkdir -p "$out"
deb="$out/cumulo_${version}_${arch}.deb"
dpkg-deb --build --root-owner-group "$pkg" "$deb" >/dev/null
say "built $deb"
echo "$deb"
