#!/usr/bin/env bash
# Forgets in batches (issue 33): 20,000 empty files made in one directory over --uring, then
# unlinked (timed); prints the unlink time, the profile's OP_FORGET and the daemon's context
# switches during the unlink phase. Run it alternately with two binaries to compare.
#   benchmarks/scripts/forget-batch.sh FSPROF-FUSE-BINARY
set -u
B=$1; W=${WORK:-/tmp/fsprof-forget}; L=$W/l; M=$W/m; N=20000
rm -rf "$W"; mkdir -p "$L" "$M"
"$B" "$L" "$M" --uring 2>/dev/null || exit 1
trap 'cd /; umount "$M"' EXIT
pid=$(pgrep -n -f "$B $L $M")
mkdir "$M/d"; cd "$M/d"
python3 -c "import os
for i in range($N): os.close(os.open(f'f{i}', os.O_CREAT|os.O_EXCL|os.O_WRONLY))"
sleep 0.5
cs() { cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/{s+=$2} END{print s}'; }
: > "$M/.fsprof"; c0=$(cs)
t=$(python3 -c "import os,time
t=time.perf_counter()
for i in range($N): os.unlink(f'f{i}')
print(f'{time.perf_counter()-t:.3f}')")
sleep 0.5; c1=$(cs)
f=$(awk '/^# layer=fuse /{f=1;next} /^# /{f=0} f && /^OP_FORGET/{print $2}' "$M/.fsprof")
echo "$(basename "$B") unlink ${t}s forgets $f ctxsw $((c1-c0))"
