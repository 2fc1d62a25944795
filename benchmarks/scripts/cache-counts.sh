#!/usr/bin/env bash
# The fuse layer's requests per file of each metadata phase (issue 33, docs/cache.md): 2,000
# empty files in one directory over --uring; create, stat after drop_caches, stat again, find
# after drop_caches, unlink. Needs root (drop_caches). Run nothing else that drops caches.
#   benchmarks/scripts/cache-counts.sh [FSPROF-FUSE OPTIONS...]   e.g. --cache exact
set -u
B=${FSPROF_FUSE:-$(dirname "$0")/../../target/release/fsprof-fuse}
W=${WORK:-/tmp/fsprof-cache-counts}; L=$W/lower; M=$W/mnt; N=2000
rm -rf "$W"; mkdir -p "$L" "$M"
"$B" "$L" "$M" --uring "$@" || exit 1
trap 'cd /; umount "$M"' EXIT
show() {
  echo "== $1"
  awk -v n=$N '/^# layer=fuse /{f=1;next} /^# /{f=0}
    f && /^OP_/{printf "%s=%.2f ", substr($1,4), $2/n} END{print ""}' "$M/.fsprof"
  : > "$M/.fsprof"
}
mkdir "$M/d"; : > "$M/.fsprof"; cd "$M/d"
py() { python3 -c "import os
for i in range($N): $1"; }
py "os.close(os.open(f'f{i}', os.O_CREAT|os.O_EXCL|os.O_WRONLY))"; sleep 0.5; show create
sync; echo 3 > /proc/sys/vm/drop_caches; : > "$M/.fsprof"
py "os.stat(f'f{i}')"; show stat_cold
py "os.stat(f'f{i}')"; show stat_warm
sync; echo 3 > /proc/sys/vm/drop_caches; : > "$M/.fsprof"
find "$M/d" -printf '%s\n' > /dev/null; show find
py "os.unlink(f'f{i}')"; sleep 0.5; show unlink
