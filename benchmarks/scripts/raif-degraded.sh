#!/bin/bash
# What a failed branch costs RAIF's writes: RAIF5 over 3 branches (stripe 64 KiB, fresh branch
# directories per run), healthy against degraded (branch 1 failed by `raif fail` right after the
# mount: every write then also logs its partial parity and waits for it, see
# raif/src/intent), alternating in each round, RUNS rounds; prints each run, then medians
# [range] and the ratio degraded/healthy. Each run starts after `sync` and SETTLE s of rest.
# Root; needs fio.
#
# Workloads: append (fio: one 256 MiB file in 64 KiB writes, fsync every 16 writes and at the
# end), overwrite (fio: 8,192 random 4 KiB writes over a 64 MiB file laid out first, untimed;
# fsync every 64 writes) and overwrite4 (the same by 4 writers at once, each 2,048 writes over a
# 16 MiB file of its own: writes in flight together, whose log entries can share a sync).
# With BEFORE_RAIF set to another build, its healthy and degraded runs alternate with this
# one's (targets before-healthy, before-degraded, healthy, degraded).
# Usage: [RAIF=target/release/raif] [BEFORE_RAIF=...] [WORKLOADS="append overwrite overwrite4"] \
#            benchmarks/scripts/raif-degraded.sh [RUNS]
set -euo pipefail
RUNS=${1:-5}
BIN=${RAIF:-target/release/raif}
base=$(mktemp -d /tmp/fsprof-degraded-XXXXXX)
trap 'umount "$base/m" 2>/dev/null || true; rm -rf "$base"' EXIT
# shellcheck source=raif-postmark.sh
. "$(dirname "$0")/raif-postmark.sh"
declare -A times
targets=(healthy degraded)
if [ -n "${BEFORE_RAIF:-}" ]; then targets=(before-healthy before-degraded healthy degraded); fi
read -ra workloads <<< "${WORKLOADS:-append overwrite overwrite4}"
run_one() { # workload target
    local w=$1 t=$2 prog=$BIN
    case $t in before-*) prog=$BEFORE_RAIF ;; esac
    rm -rf "$base/b0" "$base/b1" "$base/b2"; mkdir -p "$base/b0" "$base/b1" "$base/b2" "$base/m"
    "$prog" --branches "$base/b0,$base/b1,$base/b2" --level 5 -f "$base/m" \
        > /dev/null 2>> "$base/daemon.log" &
    local pid=$!
    for _ in $(seq 100); do mountpoint -q "$base/m" && break; sleep 0.1; done
    # `fail 1` through the control file: the build before may have no `raif fail`.
    case $t in *degraded) echo "fail 1" > "$base/m/.raif" ;; esac
    case $w in
        overwrite) fio --name=o --directory="$base/m" --rw=write --bs=1m --size=64M \
            --ioengine=psync --fallocate=none --end_fsync=1 --output=/dev/null ;;
        overwrite4) fio --name=o --directory="$base/m" --rw=write --bs=1m --size=16M \
            --numjobs=4 --ioengine=psync --fallocate=none --end_fsync=1 --output=/dev/null ;;
    esac
    sync; sleep "${SETTLE:-3}"
    local s e
    s=$(date +%s.%N)
    case $w in
        append) fio --name=a --directory="$base/m" --rw=write --bs=64k --size=256M \
            --fsync=16 --end_fsync=1 --ioengine=psync --fallocate=none --output=/dev/null ;;
        overwrite) fio --name=o --directory="$base/m" --rw=randwrite --bs=4k --size=64M \
            --number_ios=8192 --fsync=64 --ioengine=psync --fallocate=none --randrepeat=1 \
            --overwrite=1 --output=/dev/null ;;
        overwrite4) fio --name=o --directory="$base/m" --rw=randwrite --bs=4k --size=16M \
            --numjobs=4 --number_ios=2048 --fsync=64 --ioengine=psync --fallocate=none \
            --randrepeat=1 --overwrite=1 --output=/dev/null ;;
    esac
    e=$(date +%s.%N)
    # fio's last process may still hold a file for a moment.
    for _ in $(seq 50); do umount "$base/m" 2> /dev/null && break; sleep 0.2; done
    wait "$pid" || true
    echo "$e - $s" | bc
}
for i in $(seq "$RUNS"); do
    for w in "${workloads[@]}"; do
        for t in "${targets[@]}"; do
            x=$(run_one "$w" "$t"); times[$w.$t]+="$x "
            echo "run $i $w $t: $x s"
        done
    done
done
for w in "${workloads[@]}"; do
    ref=$(echo "${times[$w.${targets[0]}]}" | med)
    line="$w:"
    for t in "${targets[@]}"; do
        m=$(echo "${times[$w.$t]}" | med)
        r=$(echo "${m%% *} / ${ref%% *}" | bc -l | cut -c1-5)
        line+=" $t $m s (x$r);"
    done
    echo "median $line"
done
