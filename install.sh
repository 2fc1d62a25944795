#!/usr/bin/env bash
# Installs fsprof: its programs (fsprof, fsprof-fuse, raif, fsprof-postmark, fsprof-bench), the
# preload library that `fsprof run` loads, man pages and bash, zsh and fish completions.
#
#   ./install.sh                 # into /usr/local as root, ~/.local otherwise
#   ./install.sh --prefix DIR    # into DIR/bin, DIR/lib/fsprof, DIR/share/...
#   ./install.sh --deb DIR       # write the Debian package DIR/fsprof_VERSION_ARCH.deb instead
#   ./install.sh --no-build      # use what `cargo build --release` built already
#
# `cargo install` alone cannot place the preload library (a shared library, not a program):
# fsprof finds it in ../lib/fsprof/ beside its own directory, owned by root or by you and
# writable by no one else. The package puts the programs in /usr/bin and the library in
# /usr/lib/fsprof (`apt-get install ./fsprof_*.deb`; `apt-get purge fsprof` removes it all).
set -euo pipefail

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

root=$(cd "$(dirname "$0")" && pwd)
prefix=""
deb=""
build=1
target="${CARGO_TARGET_DIR:-$root/target}"
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
                  prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --deb) [ $# -ge 2 ] || { echo "install.sh: --deb needs a directory" >&2; exit 2; }
               deb=$2; shift 2 ;;
        --deb=*) deb=${1#--deb=}; shift ;;
        --no-build) build=0; shift ;;
        --target-dir) [ $# -ge 2 ] || { echo "install.sh: --target-dir needs a directory" >&2; exit 2; }
                      target=$2; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
if [ -n "$deb" ] && [ -n "$prefix" ]; then
    echo "install.sh: --deb and --prefix do not go together (the package installs into /usr)" >&2
    exit 2
fi
if [ -n "$deb" ]; then
    command -v dpkg-deb > /dev/null || {
        echo "install.sh: --deb needs dpkg-deb (Debian package dpkg)" >&2; exit 2; }
    mkdir -p "$deb" || exit 2
    deb=$(cd "$deb" && pwd)
fi
if [ -z "$prefix" ]; then
    if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix="$HOME/.local"; fi
fi
case "$prefix" in /*) ;; *) prefix="$PWD/$prefix" ;; esac

programs=(fsprof fsprof-fuse raif fsprof-postmark fsprof-bench)
if [ "$build" = 1 ]; then
    echo "install.sh: building (cargo build --release)..."
    (cd "$root" && CARGO_TARGET_DIR="$target" cargo build --release --workspace --bins --lib)
fi
release="$target/release"
for p in "${programs[@]}"; do
    [ -x "$release/$p" ] || { echo "install.sh: $release/$p is missing (build first, or drop --no-build)" >&2; exit 2; }
done
# The most recently built of the two places cargo leaves it (as fsprof itself looks for it): a
# library left by an older `cargo build` must not shadow the one built with these programs.
lib=""
for c in "$release/libfsprof_preload.so" "$release/deps/libfsprof_preload.so"; do
    if [ -f "$c" ] && { [ -z "$lib" ] || [ "$c" -nt "$lib" ]; }; then lib="$c"; fi
done
[ -n "$lib" ] || { echo "install.sh: libfsprof_preload.so is missing under $release" >&2; exit 2; }

# What to paste: a path quoted for the shell.
quoted() { printf '%q' "$1"; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
docs="$tmp/docs"
for p in "${programs[@]}"; do
    "$release/$p" --generate-docs "$docs" > /dev/null
done
pages=$(ls "$docs"/man1 | wc -l)

if [ -n "$deb" ]; then
    "$root/packaging/deb.sh" "$root" "$release" "$lib" "$docs" "$deb" "${programs[@]}"
    exit 0
fi

install -d "$prefix/bin" "$prefix/lib/fsprof" "$prefix/share/man/man1" \
    "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d"
for p in "${programs[@]}"; do
    install -m 0755 "$release/$p" "$prefix/bin/$p"
done
install -m 0644 "$lib" "$prefix/lib/fsprof/libfsprof_preload.so"
install -m 0644 "$docs"/man1/*.1 "$prefix/share/man/man1/"
install -m 0644 "$docs"/bash/* "$prefix/share/bash-completion/completions/"
install -m 0644 "$docs"/zsh/* "$prefix/share/zsh/site-functions/"
install -m 0644 "$docs"/fish/* "$prefix/share/fish/vendor_completions.d/"

echo "install.sh: installed ${#programs[@]} programs in $prefix/bin, the preload library in $prefix/lib/fsprof,"
echo "  $pages man pages in $prefix/share/man/man1, bash, zsh and fish completions in $prefix/share"
case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "  programs: $prefix/bin is not on your PATH; add it with:"
       echo "    export PATH=$(quoted "$prefix/bin"):\"\$PATH\"" ;;
esac
if ! manpath 2>/dev/null | tr ':' '\n' | grep -qx "$prefix/share/man"; then
    echo "  man pages: $prefix/share/man is not on the manual path; read them with:"
    echo "    man -M $(quoted "$prefix/share/man") fsprof"
fi
