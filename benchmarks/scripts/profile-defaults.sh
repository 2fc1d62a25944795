#!/bin/bash
# What fsprof profile's record defaults cost (the breakdown, the slowest requests, the hot files,
# the callers by comm) against --no-record, and what --breakdown alone costs: a small Postmark
# (1,000 files, 5,000 transactions, seed 42: about 46,000 requests, every one reaching the
# daemon) in DIR through `fsprof profile`, the three targets alternating in each round, each
# run on an empty DIR. Two measures per run: the
# wall time fsprof reports, and the CPU time of the fsprof process itself (its serving
# threads, not the workload's: read from /proc/PPID/stat by the workload's shell as it ends).
# Prints every run, then the median and range of each target and measure and its ratio to
# --no-record. Root (fsprof profile mounts).
# Usage: benchmarks/scripts/profile-defaults.sh DIR [ROUNDS] [FSPROF]
set -euo pipefail
DIR=${1:?usage: profile-defaults.sh DIR [ROUNDS] [FSPROF]}
ROUNDS=${2:-7}
FSPROF=$(realpath "${3:-target/release/fsprof}")
POSTMARK=$(dirname "$FSPROF")/fsprof-postmark
mkdir -p "$DIR"
cfg=$(mktemp)
printf 'set number 1000\nset transactions 5000\nset seed 42\nrun\nquit\n' > "$cfg"
work="$POSTMARK $cfg > /dev/null; cut -d' ' -f14,15 /proc/\$PPID/stat >&2"
declare -A args=(
    [no-record]="--no-record"
    [defaults]=""
    [breakdown]="--no-record --breakdown"
)
targets=(no-record defaults breakdown)
out=$(mktemp)
trap 'rm -f "$out" "$out.cpu" "$cfg"' EXIT
for r in $(seq "$ROUNDS"); do
    for t in "${targets[@]}"; do
        # shellcheck disable=SC2086
        rm -rf "${DIR:?}"/*
        s=$("$FSPROF" profile "$DIR" ${args[$t]} --findings-only -- sh -c "$work" \
            2> "$out.cpu" | sed -n '1s/.* in \([0-9.]*\) s$/\1/p')
        ticks=$(awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $1 + $2}' "$out.cpu" | tail -1)
        echo "$r $t $s $ticks" | tee -a "$out"
    done
done
python3 - "$out" "$(getconf CLK_TCK)" <<'PY'
import statistics, sys
hz = float(sys.argv[2])
runs = {}
for line in open(sys.argv[1]):
    _, t, wall, ticks = line.split()
    runs.setdefault(t, []).append((float(wall), float(ticks) / hz))
for i, what in [(0, "wall"), (1, "fsprof CPU")]:
    base = statistics.median(v[i] for v in runs["no-record"])
    for t, v in runs.items():
        x = [r[i] for r in v]
        m = statistics.median(x)
        print(f"{what:10} {t:10} median {m:.3f} s [{min(x):.3f}-{max(x):.3f}], "
              f"x{m / base:.3f} of --no-record, {len(x)} runs")
PY
