#!/bin/sh
# The cost of --kernel's block level (an ftrace instance) per record: 4 KiB O_DIRECT reads of a
# loop device under an fsprof-fuse --kernel mount (the block layer counts every request of the
# device), with the daemon's CPU time read from /proc before and after (the reads make no FUSE
# request: it is the tracer's reading, decoding, pairing and recording),
# and the reads' own time with and without the mount, ROUNDS alternating rounds.
# Usage: block-trace-cost.sh WORKDIR [ROUNDS] [READS]   (root; losetup, mkfs.ext4, dd; the
# 512 MiB device holds 131,072 blocks, so at most that many reads)
set -eu
work=$1; rounds=${2:-5}; reads=${3:-131072}
bin=$(dirname "$0")/../../target/release/fsprof-fuse
mkdir -p "$work/ext" "$work/mnt"
truncate -s 512M "$work/img"
dev=$(losetup --find --show --direct-io=on "$work/img")
cleanup() {
    umount "$work/mnt" 2>/dev/null || true
    umount "$work/ext" 2>/dev/null || true
    losetup -d "$dev" 2>/dev/null || true
}
trap cleanup EXIT
mkfs.ext4 -q -F "$dev"
mount "$dev" "$work/ext"
ticks=$(getconf CLK_TCK)
daemon_cpu() { # pid: CPU ticks of the daemon (its kernel-trace thread drains, and the
    # thread serving the .fsprof read drains before the snapshot; dd makes no FUSE request)
    awk '{print $14 + $15}' /proc/"$1"/stat
}
reads_s() { # seconds of wall time for the reads
    s=$(date +%s.%N)
    dd if="$dev" of=/dev/null iflag=direct bs=4k count="$reads" status=none
    e=$(date +%s.%N)
    echo "$s $e" | awk '{printf "%.3f", $2 - $1}'
}
for r in $(seq "$rounds"); do
    plain=$(reads_s)
    "$bin" --kernel "$work/ext" "$work/mnt"
    pid=$(pgrep -n -f "fsprof-fuse --kernel $work/ext")
    : > "$work/mnt/.fsprof"
    c0=$(daemon_cpu "$pid")
    traced=$(reads_s)
    cp "$work/mnt/.fsprof" "$work/profile"
    c1=$(daemon_cpu "$pid")
    n=$(awk '/^# layer=/{b = ($2 ~ /^layer=block@dev/)} b && /^BLK_READ/{s += $2} END{print s + 0}' "$work/profile")
    hdr=$(grep -oE '(block_trace|kernel_lost|block_unsampled)=[^ ]*' "$work/profile" | tr '\n' ' ')
    umount "$work/mnt"
    echo "round $r: reads ${plain}s plain, ${traced}s traced; block requests $n; daemon CPU $(( (c1 - c0) * 1000 / ticks )) ms; $hdr"
done
