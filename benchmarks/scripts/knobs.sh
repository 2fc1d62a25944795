#!/usr/bin/env bash
# One knob at a time: Debian postmark on fsprof-fuse with each kernel capability or caching
# choice switched off (or on) relative to the defaults, targets alternating, RUNS runs each.
# Prints median wall time and median daemon CPU time (user+sys) per variant.
#   [PIN=CPU] benchmarks/scripts/knobs.sh [RUNS] [FILES] [TRANSACTIONS]
# PIN runs the daemon and Postmark on that one CPU (see fsprof-bench --pin): on a VM the
# scheduler's placement of the two otherwise changes run times by up to 2x, more than any knob.
set -euo pipefail
RUNS=${1:-3}; FILES=${2:-4000}; TX=${3:-40000}; PIN=${PIN:-}
pinned() { if [ -n "$PIN" ]; then taskset -c "$PIN" "$@"; else "$@"; fi; }
BIN=${FSPROF_FUSE:-$(dirname "$0")/../../target/release/fsprof-fuse}
W=${WORK:-/tmp/fsprof-knobs}
mkdir -p "$W"
cfg="$W/pm.cfg"
cat > "$cfg" <<CFG
set size 512 10240
set number $FILES
set transactions $TX
set subdirectories $((FILES / 33))
set read 4096
set write 4096
set buffering false
set bias read 5
set bias create 5
set seed 42
set location $W/mnt
run
quit
CFG
variants=(
  "native|"
  "defaults|"
  "no-profile|--no-profile"
  "flush-always|--flush always"
  "no-killpriv|--caps-off killpriv"
  "no-readdirplus|--caps-off readdirplus"
  "no-parallel-dirops|--caps-off parallel-dirops"
  "no-keep-cache|--no-keep-cache"
  "threads-1|--threads 1"
  "threads-2|--threads 2"
  "threads-8|--threads 8"
  "timeouts-60s|--entry-timeout 60s --attr-timeout 60s"
  "writeback|--writeback"
  "kernel-passthrough|--passthrough"
  "direct-io|--direct-io"
)
declare -A T C
cleanup() { umount "$W/mnt" 2>/dev/null || true; }
trap cleanup EXIT
for r in $(seq "$RUNS"); do
  for v in "${variants[@]}"; do
    name=${v%%|*}; args=${v#*|}
    rm -rf "$W/lower" "$W/mnt"; mkdir -p "$W/lower" "$W/mnt"
    target="$W/mnt"; pid=""
    if [ "$name" = native ]; then
      sed "s|set location .*|set location $W/lower|" "$cfg" > "$W/native.cfg"; c="$W/native.cfg"
    else
      # shellcheck disable=SC2086
      pinned "$BIN" "$W/lower" "$W/mnt" $args
      pid=$(pgrep -n -f "fsprof-fuse $W/lower $W/mnt")
      c="$cfg"
    fi
    sync; s=$(date +%s.%N); pinned postmark "$c" > /dev/null; e=$(date +%s.%N)
    cpu=0
    if [ -n "$pid" ]; then
      cpu=$(awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15)/hz}' "/proc/$pid/stat")
      umount "$W/mnt"
      for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    fi
    T[$name]+="$(echo "$e - $s" | bc) "; C[$name]+="$cpu "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(echo "${T[native]}" | median)
printf '%-20s %10s %8s %12s   %s\n' variant "median s" "×native" "daemon CPU s" "runs (s)"
for v in "${variants[@]}"; do
  name=${v%%|*}; m=$(echo "${T[$name]}" | median); cm=$(echo "${C[$name]}" | median)
  printf '%-20s %10.3f %8.2f %12s   %s\n' "$name" "$m" "$(echo "$m / $base" | bc -l)" "$cm" "${T[$name]}"
done
