#!/bin/bash
# What RAIF's write-intent log and block checksums cost, part by part: RAIF5 over 3 branches
# (stripe 64 KiB, fresh directories per run) under three workloads, alternating three builds or
# settings in each round, RUNS rounds; prints each run, then medians [range] and ratios to the
# first target. Each run starts on fresh branch directories after `sync` and 8 s of rest. Root.
#
#   before   $BEFORE_RAIF: a raif built before the intent log (git worktree at cdf1a11)
#   intent   this tree's raif with --no-checksums (the intent log alone)
#   both     this tree's raif as it comes (intent log and checksums)
#
# Workloads: postmark (postmark-raif's: 6,000 files of 512 B-10 KiB, 60,000 transactions, 60
# subdirectories, 4 KiB unbuffered I/O, seed 42), seqwrite (fio: one 1 GiB file in 128 KiB
# writes, fsync at the end) and randwrite (fio: 4 KiB random writes over a 256 MiB file, fsync
# every 64 writes, 32,768 writes).
# Usage: BEFORE_RAIF=/path/to/old/raif [WORKLOADS="seqwrite randwrite"] \
#            benchmarks/scripts/durability-cost.sh [RUNS]
set -euo pipefail
RUNS=${1:-3}
BIN=${RAIF:-target/release/raif}; PM=${PM:-target/release/fsprof-postmark}
BEFORE=${BEFORE_RAIF:?set BEFORE_RAIF to a raif built before the intent log}
base=$(mktemp -d /tmp/fsprof-durability-XXXXXX)
trap 'umount "$base/m" 2>/dev/null || true; rm -rf "$base"' EXIT
# shellcheck source=raif-postmark.sh
. "$(dirname "$0")/raif-postmark.sh"
raif_postmark_config "$base/pm"
declare -A times
targets=(before intent both)
read -ra workloads <<< "${WORKLOADS:-postmark seqwrite randwrite}"
run_one() { # workload target
    local w=$1 t=$2 prog=$BIN flag=()
    case $t in before) prog=$BEFORE ;; intent) flag=(--no-checksums) ;; esac
    rm -rf "$base/b0" "$base/b1" "$base/b2"; mkdir -p "$base/b0" "$base/b1" "$base/b2" "$base/m"
    # In the foreground, so that after the unmount the script can wait for the daemon to end
    # (it removes its intent logs on the way out: the next run's rm would race with it).
    "$prog" --branches "$base/b0,$base/b1,$base/b2" --level 5 "${flag[@]}" -f "$base/m" \
        > /dev/null 2>> "$base/daemon.log" &
    local pid=$!
    for _ in $(seq 100); do mountpoint -q "$base/m" && break; sleep 0.1; done
    # What the last run deleted is written back and aged first: ext4's inode allocator
    # (recently_deleted) otherwise slows the creates of whichever run comes next, and the
    # target that creates the most files (sum files) pays the most.
    sync; sleep "${SETTLE:-8}"
    local s e
    s=$(date +%s.%N)
    case $w in
        postmark) sed "s|MNT|$base/m|" "$base/pm" > "$base/pm.run"; "$PM" "$base/pm.run" > /dev/null ;;
        seqwrite) fio --name=s --directory="$base/m" --rw=write --bs=128k --size=1G \
            --ioengine=psync --fallocate=none --end_fsync=1 --output=/dev/null ;;
        randwrite) fio --name=r --directory="$base/m" --rw=randwrite --bs=4k --size=256M \
            --number_ios=32768 --fsync=64 --ioengine=psync --fallocate=none --randrepeat=1 \
            --output=/dev/null ;;
    esac
    e=$(date +%s.%N)
    umount "$base/m"
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
    ref=$(echo "${times[$w.before]}" | med)
    line="$w:"
    for t in "${targets[@]}"; do
        m=$(echo "${times[$w.$t]}" | med)
        r=$(echo "${m%% *} / ${ref%% *}" | bc -l | cut -c1-5)
        line+=" $t $m s (x$r);"
    done
    echo "median $line"
done
