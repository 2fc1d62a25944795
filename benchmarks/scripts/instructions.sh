#!/usr/bin/env bash
# What profiling costs, counted in instructions rather than time (wall and CPU time on a shared
# VM move by 1.7x between runs; instruction counts move by about 1%). Runs our Postmark on
# fsprof-fuse with and without profiling (and on bindfs, if installed), alternating, and prints
# the daemon's user and kernel instructions, cycles and context switches over each run.
#   benchmarks/scripts/instructions.sh [RUNS] [FILES] [TRANSACTIONS]
# Needs root and perf. WORK (default /tmp/fsprof-instr) holds the lower directory and mount.
set -euo pipefail
RUNS=${1:-3}; FILES=${2:-6000}; TX=${3:-60000}
BIN=$(cd "$(dirname "$0")/../../target/release" && pwd)
W=${WORK:-/tmp/fsprof-instr}
L="$W/lower"; M="$W/mnt"
mkdir -p "$W"
trap 'mountpoint -q "$M" && umount "$M"; true' EXIT
cat > "$W/pm.cfg" <<CFG
set size 512 10240
set number $FILES
set seed 42
set transactions $TX
set subdirectories $((FILES / 33))
set read 4096
set write 4096
set buffering false
set bias read 5
set bias create 5
set location $M
run
quit
CFG
# VARIANTS: fsprof, noprof, records (fsprof-fuse --slow 10ms --by uid), bindfs, or tN
# (fsprof-fuse with N worker threads).
variants=${VARIANTS:-fsprof noprof}
[ -z "${VARIANTS:-}" ] && command -v bindfs >/dev/null && variants="$variants bindfs"
for _ in $(seq "$RUNS"); do
  for t in $variants; do
    rm -rf "$L" "$M"; mkdir -p "$L" "$M"; sync
    case $t in
      fsprof) "$BIN/fsprof-fuse" "$L" "$M" ;;
      noprof) "$BIN/fsprof-fuse" --no-profile "$L" "$M" ;;
      records) "$BIN/fsprof-fuse" --slow 10ms --by uid "$L" "$M" ;;
      bindfs) bindfs "$L" "$M" ;;
      t*) "$BIN/fsprof-fuse" --threads "${t#t}" "$L" "$M" ;;
    esac
    pid=$(pgrep -f -n "$L $M")
    perf stat -x, -o "$W/stat" -e instructions:u,instructions:k,cycles,context-switches -p "$pid" &
    perf_pid=$!
    sleep 0.3
    "$BIN/fsprof-postmark" "$W/pm.cfg" >/dev/null
    kill -INT "$perf_pid"; wait "$perf_pid" || true
    printf '%-7s %s\n' "$t" "$(grep -v '^#' "$W/stat" | grep . |
      awk -F, '{printf "%s %.1fM  ", $3, $1 / 1e6}')"
    umount "$M"
  done
done
