#!/usr/bin/env bash
# Writes the Debian package of fsprof, DIR/fsprof_VERSION_ARCH.deb; install.sh --deb DIR runs
# it with what it built: packaging/deb.sh ROOT RELEASE PRELOAD DOCS DIR PROGRAM...
#
# The package holds the programs in /usr/bin, the preload library in /usr/lib/fsprof (where
# /usr/bin/fsprof finds it), the man pages, the bash, zsh and fish completions, the README,
# the changelog and the licence; it depends on fuse3 (mount.fuse3, fusermount3) and the C
# libraries dpkg-shlibdeps finds. Its postrm removes /var/log/fsprof/ (the daemons' logs) on
# purge only. dpkg-deb --root-owner-group makes every file root's without fakeroot.
set -euo pipefail

[ $# -ge 6 ] || { echo "usage: packaging/deb.sh ROOT RELEASE PRELOAD DOCS DIR PROGRAM..." >&2; exit 2; }
root=$1 release=$2 lib=$3 docs=$4 out=$5
shift 5
programs=("$@")
here=$(cd "$(dirname "$0")" && pwd)

version=$(sed -n '/^\[workspace\.package\]/,/^\[/ s/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml")
[ -n "$version" ] || { echo "install.sh: no version in $root/Cargo.toml" >&2; exit 2; }
arch=$(dpkg --print-architecture)
deb="$out/fsprof_${version}_${arch}.deb"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/fsprof"
share="$pkg/usr/share"
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/fsprof" "$share/man/man1" \
    "$share/bash-completion/completions" "$share/zsh/vendor-completions" \
    "$share/fish/vendor_completions.d" "$share/doc/fsprof"

# The programs without their line tables (a panic still names its file and line; the
# tables are for a debugger): about a third of their size.
strip_debug() {
    if command -v strip > /dev/null; then strip --strip-debug "$1"; fi
}
for p in "${programs[@]}"; do
    install -m 0755 "$release/$p" "$pkg/usr/bin/$p"
    strip_debug "$pkg/usr/bin/$p"
done
install -m 0644 "$lib" "$pkg/usr/lib/fsprof/libfsprof_preload.so"
strip_debug "$pkg/usr/lib/fsprof/libfsprof_preload.so"
for m in "$docs"/man1/*.1; do
    gzip -9n < "$m" > "$share/man/man1/$(basename "$m").gz"
done
install -m 0644 "$docs"/bash/* "$share/bash-completion/completions/"
install -m 0644 "$docs"/zsh/* "$share/zsh/vendor-completions/"
install -m 0644 "$docs"/fish/* "$share/fish/vendor_completions.d/"
install -m 0644 "$root/README.md" "$share/doc/fsprof/README.md"
gzip -9n < "$root/CHANGELOG.md" > "$share/doc/fsprof/changelog.gz"
install -m 0644 "$here/copyright" "$share/doc/fsprof/copyright"
find "$share" -type f -exec chmod 0644 {} +

# The C libraries the programs need, as dpkg-shlibdeps (dpkg-dev) words them.
depends="libc6"
if command -v dpkg-shlibdeps > /dev/null; then
    mkdir -p "$stage/src/debian"
    printf 'Source: fsprof\n\nPackage: fsprof\nArchitecture: any\n' > "$stage/src/debian/control"
    objs=("${programs[@]/#/-e$pkg/usr/bin/}")
    found=$(cd "$stage/src" && dpkg-shlibdeps -O "${objs[@]}" \
        "-e$pkg/usr/lib/fsprof/libfsprof_preload.so" 2> /dev/null | sed -n 's/^shlibs:Depends=//p')
    [ -n "$found" ] && depends=$found
else
    echo "install.sh: dpkg-shlibdeps (dpkg-dev) is missing: the package depends on libc6 unversioned" >&2
fi
size=$(du -sk "$pkg/usr" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends, fuse3/" "$here/control" > "$pkg/DEBIAN/control"
install -m 0755 "$here/postrm" "$pkg/DEBIAN/postrm"
(cd "$pkg" && find usr -type f -printf '%P\n' | sort | sed 's|^|usr/|' \
    | xargs -d '\n' md5sum > DEBIAN/md5sums)
chmod 0644 "$pkg/DEBIAN/md5sums"

dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" > /dev/null
files=$(find "$pkg/usr" -type f | wc -l)
echo "install.sh: wrote $deb ($files files: ${#programs[@]} programs in /usr/bin, the preload library in /usr/lib/fsprof,"
echo "  man pages, completions, README and licence); install it with:"
echo "    apt-get install $(printf '%q' "$deb")"
