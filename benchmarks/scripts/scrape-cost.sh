#!/bin/bash
# The daemon CPU one scrape of --metrics costs: mounts BIN (an fsprof-fuse binary) with both
# layers over a fresh directory, runs a small mixed workload so that many operations have
# histograms, then times N scrapes by the daemon's utime+stime in /proc. Root; needs curl.
# Usage: benchmarks/scripts/scrape-cost.sh [BIN] [N]
set -euo pipefail
BIN=${1:-target/release/fsprof-fuse}; N=${2:-300}; PORT=${PORT:-19900}
dir=$(mktemp -d /tmp/fsprof-scrape-XXXXXX)
mkdir -p "$dir/l" "$dir/m"
"$BIN" "$dir/l" "$dir/m" --metrics "127.0.0.1:$PORT" --layers fuse,lower
trap 'umount "$dir/m" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir/m"
for i in $(seq 200); do
    echo x > "f$i"; cat "f$i" > /dev/null; mkdir "d$i"; ls "d$i" > /dev/null
    stat "nope$i" 2> /dev/null || true
done
rm -f f1; mv f2 f2b; ln -s f3 s1; readlink s1 > /dev/null
cd /
pid=$(pgrep -n -f "$dir/l $dir/m")
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(cpu); bytes=$(curl -s "127.0.0.1:$PORT/metrics" | wc -c)
for _ in $(seq "$N"); do curl -s -o /dev/null "127.0.0.1:$PORT/metrics"; done
b=$(cpu); hz=$(getconf CLK_TCK)
echo "exposition $bytes bytes; daemon CPU per scrape: $(echo "scale=3; ($b - $a) * 1000 / $hz / $N" | bc) ms over $N scrapes"
