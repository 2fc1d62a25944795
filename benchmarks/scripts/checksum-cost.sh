#!/bin/bash
# What RAIF's block checksums cost: postmark-raif's workload (fsprof-postmark: 6,000 files of
# 512 B-10 KiB, 60,000 transactions, 60 subdirectories, 4 KiB unbuffered I/O, seed 42) on
# RAIF5 over 3 branches (stripe 64 KiB) in a fresh directory per run, alternating the default
# (checksums) with --no-checksums, RUNS times each; prints each run and the medians. Root.
# Usage: benchmarks/scripts/checksum-cost.sh [RUNS] [EXTRA RAIF ARGS...]
set -euo pipefail
RUNS=${1:-5}; shift || true
BIN=${RAIF:-target/release/raif}; PM=${PM:-target/release/fsprof-postmark}
base=$(mktemp -d /tmp/fsprof-sums-XXXXXX)
trap 'umount "$base/m" 2>/dev/null || true; rm -rf "$base"' EXIT
# shellcheck source=raif-postmark.sh
. "$(dirname "$0")/raif-postmark.sh"
raif_postmark_config "$base/pm"
declare -A times
for i in $(seq "$RUNS"); do
    for mode in checksums no-checksums; do
        rm -rf "$base/b0" "$base/b1" "$base/b2"; mkdir -p "$base/b0" "$base/b1" "$base/b2" "$base/m"
        flag=(); [ "$mode" = no-checksums ] && flag=(--no-checksums)
        "$BIN" --branches "$base/b0,$base/b1,$base/b2" --level 5 "${flag[@]}" "$@" "$base/m"
        sed "s|MNT|$base/m|" "$base/pm" > "$base/pm.run"
        s=$(date +%s.%N); "$PM" "$base/pm.run" > /dev/null; e=$(date +%s.%N)
        umount "$base/m"
        t=$(echo "$e - $s" | bc); times[$mode]+="$t "
        echo "run $i $mode: $t s"
    done
done
c=$(echo "${times[checksums]}" | med); n=$(echo "${times[no-checksums]}" | med)
echo "median total: checksums $c s, no-checksums $n s"
echo "ratio (medians): $(echo "${c%% *} / ${n%% *}" | bc -l | cut -c1-5)"
